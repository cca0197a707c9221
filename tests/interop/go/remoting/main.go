// Command remoting drives Apache's Remoting Go client (github.com/apache/rocketmq-client-go/v2)
// straight against OrbitMQ's NameServer and brokers, one scenario per run, for
// tests/interop/go/test_go_remoting.py.
//
// Every outcome is one line on stdout, fields separated by single spaces:
//
//	SENT <key> <msgId> <brokerName> <queueId> <how>    a send (sync, async, big) succeeded
//	RECV <key> <msgId> <instance> <queueId> <bodyLen> <bodySha1> <reconsumeTimes>
//	ROUND <n> <clean>                                  cluster: one probe round of the settling
//	CASE <name> <code> <message>                       a bad-input case; code -1 when client-side
//	ERROR <op> <code> <message>                        an unexpected failure (the run exits 1)
//
// The client's log goes to the file named by ORBITMQ_GO_CLIENT_LOG (default: a file under the
// system's temporary directory) at level warn, never to stdout.
package main

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

var outMu sync.Mutex

func emit(fields ...interface{}) {
	parts := make([]string, len(fields))
	for i, f := range fields {
		parts[i] = strings.ReplaceAll(fmt.Sprint(f), "\n", " ")
	}
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Println(strings.Join(parts, " "))
}

// responseCode finds "CODE: <n>" in an error's text: the client reports a broker's answer to a
// send as fmt.Errorf("CODE: %d, DESC: %s") (rmqClient.ProcessSendResponse), and its typed
// errors (primitive.MQBrokerErr, MQClientErr) print the same way.
var responseCode = regexp.MustCompile(`CODE: (-?\d+)`)

// codeOf is the Remoting response code a broker or NameServer answered, or -1 for an error the
// client raised itself.
func codeOf(err error) int {
	var broker primitive.MQBrokerErr
	if errors.As(err, &broker) {
		return int(broker.ResponseCode)
	}
	if m := responseCode.FindStringSubmatch(err.Error()); m != nil {
		code, _ := strconv.Atoi(m[1])
		return code
	}
	return -1
}

func fail(op string, err error) {
	emit("ERROR", op, codeOf(err), err)
	os.Exit(1)
}

type options struct {
	namesrv, topic, group, prefix string
	n                             int
	timeout, linger               time.Duration
}

func parse(args []string) *options {
	o := &options{}
	fs := flag.NewFlagSet("remoting", flag.ExitOnError)
	fs.StringVar(&o.namesrv, "namesrv", "127.0.0.1:9876", "the NameServer address")
	fs.StringVar(&o.topic, "topic", "", "topic")
	fs.StringVar(&o.group, "group", "", "consumer group")
	fs.StringVar(&o.prefix, "prefix", "k", "prefix of the message keys")
	fs.IntVar(&o.n, "n", 4, "messages to send (per way) or to receive")
	fs.DurationVar(&o.timeout, "timeout", 20*time.Second, "how long to wait for the messages")
	fs.DurationVar(&o.linger, "linger", 0, "consume: keep consuming this long after the n-th message")
	_ = fs.Parse(args)
	return o
}

func newProducer(o *options, extra ...producer.Option) rocketmq.Producer {
	opts := append([]producer.Option{producer.WithNameServer([]string{o.namesrv}), producer.WithRetry(2),
		producer.WithGroupName("GO_PRODUCER_" + o.prefix), producer.WithSendMsgTimeout(5 * time.Second)}, extra...)
	p, err := rocketmq.NewProducer(opts...)
	if err != nil {
		fail("new-producer", err)
	}
	if err := p.Start(); err != nil {
		fail("start-producer", err)
	}
	return p
}

func sent(key string, r *primitive.SendResult, how string) {
	emit("SENT", key, r.MsgID, r.MessageQueue.BrokerName, r.MessageQueue.QueueId, how)
}

// produce sends n messages synchronously, n asynchronously and one body over the client's
// compression threshold (4 KiB: compressed by the client, decompressed by the consumer).
func produce(o *options) {
	p := newProducer(o)
	defer func() { _ = p.Shutdown() }()
	ctx := context.Background()
	for i := 0; i < o.n; i++ {
		key := fmt.Sprintf("%s-sync-%d", o.prefix, i)
		msg := primitive.NewMessage(o.topic, []byte("sync-body-"+key)).WithTag("go").WithKeys([]string{key})
		r, err := p.SendSync(ctx, msg)
		if err != nil {
			fail("send-sync", err)
		}
		sent(key, r, "sync")
	}
	var wg sync.WaitGroup
	for i := 0; i < o.n; i++ {
		key := fmt.Sprintf("%s-async-%d", o.prefix, i)
		msg := primitive.NewMessage(o.topic, []byte("async-body-"+key)).WithTag("go").WithKeys([]string{key})
		wg.Add(1)
		err := p.SendAsync(ctx, func(_ context.Context, r *primitive.SendResult, err error) {
			defer wg.Done()
			if err != nil {
				emit("ERROR", "send-async", codeOf(err), err)
				return
			}
			sent(key, r, "async")
		}, msg)
		if err != nil {
			wg.Done()
			fail("send-async", err)
		}
	}
	wg.Wait()
	key := o.prefix + "-big"
	body := []byte(strings.Repeat("compressible body of the Go client; ", 600))
	r, err := p.SendSync(ctx, primitive.NewMessage(o.topic, body).WithKeys([]string{key}))
	if err != nil {
		fail("send-big", err)
	}
	sent(key, r, fmt.Sprintf("big:%d:%s", len(body), digest(body)))
}

func digest(b []byte) string {
	sum := sha1.Sum(b)
	return hex.EncodeToString(sum[:])
}

// received collects what the consumers of one run got: how often each key came, and to whom.
type received struct {
	mu    sync.Mutex
	count map[string]int
	by    map[string]string
}

func newReceived() *received {
	return &received{count: map[string]int{}, by: map[string]string{}}
}

func (r *received) add(key, instance string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count[key]++
	r.by[key] = instance
}

// shared reports whether every key came exactly once and each instance got as many as the other.
func (r *received) shared(keys []string, instances ...string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	per := map[string]int{}
	for _, k := range keys {
		if r.count[k] != 1 {
			return false
		}
		per[r.by[k]]++
	}
	for _, instance := range instances {
		if per[instance] != len(keys)/len(instances) {
			return false
		}
	}
	return true
}

func (r *received) has(keys []string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		if r.count[k] == 0 {
			return false
		}
	}
	return true
}

func (r *received) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.count)
}

// newConsumer starts a clustering push consumer of o.group from the first offset; instance
// names the client (its clientID) so that several can run in one process.
func newConsumer(o *options, instance string, got *received) rocketmq.PushConsumer {
	c, err := rocketmq.NewPushConsumer(consumer.WithNameServer([]string{o.namesrv}), consumer.WithGroupName(o.group),
		consumer.WithConsumerModel(consumer.Clustering), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithInstance(instance))
	if err != nil {
		fail("new-consumer", err)
	}
	err = c.Subscribe(o.topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				key := m.GetKeys()
				emit("RECV", key, m.MsgId, instance, m.Queue.QueueId, len(m.Body), digest(m.Body), m.ReconsumeTimes)
				got.add(key, instance)
			}
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		fail("subscribe", err)
	}
	if err := c.Start(); err != nil {
		fail("start-consumer", err)
	}
	return c
}

// consume runs one consumer until o.n distinct messages came (then lingers o.linger).
func consume(o *options) {
	got := newReceived()
	c := newConsumer(o, "go-consumer", got)
	deadline := time.Now().Add(o.timeout)
	for got.distinct() < o.n && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(o.linger)
	if err := c.Shutdown(); err != nil {
		fail("shutdown", err)
	}
}

// cluster starts two consumers of one group in clustering mode, waits until they share the
// topic's queues (a probe round to every queue reaches exactly one of them, two queues each;
// o.timeout at most), then sends o.n messages over all queues and waits for them (o.timeout).
// Afterwards a third consumer of the group, alone, must find nothing left to consume for
// o.linger: the first two committed their offsets on shutdown.
func cluster(o *options) {
	got := newReceived()
	c1 := newConsumer(o, "go-a", got)
	c2 := newConsumer(o, "go-b", got)
	p := newProducer(o, producer.WithQueueSelector(producer.NewManualQueueSelector()))
	defer func() { _ = p.Shutdown() }()
	ctx := context.Background()
	// The manual selector needs the queue: take the broker's name from a first send's route.
	plain := newProducer(&options{namesrv: o.namesrv, prefix: o.prefix + "plain"})
	first := primitive.NewMessage(o.topic, []byte("probe")).WithKeys([]string{o.prefix + "-probe-locate"})
	r, err := plain.SendSync(ctx, first)
	_ = plain.Shutdown()
	if err != nil {
		fail("send-probe", err)
	}
	broker := r.MessageQueue.BrokerName
	queues := 4
	sendTo := func(key string, queue int) {
		msg := primitive.NewMessage(o.topic, []byte("body-"+key)).WithKeys([]string{key})
		msg.Queue = &primitive.MessageQueue{Topic: o.topic, BrokerName: broker, QueueId: queue}
		if _, err := p.SendSync(ctx, msg); err != nil {
			fail("send", err)
		}
	}
	settled := false
	deadline := time.Now().Add(o.timeout)
	for round := 0; !settled && time.Now().Before(deadline); round++ {
		keys := make([]string, queues)
		for q := 0; q < queues; q++ {
			keys[q] = fmt.Sprintf("%s-probe-%d-%d", o.prefix, round, q)
			sendTo(keys[q], q)
		}
		roundEnd := time.Now().Add(3 * time.Second)
		for !got.has(keys) && time.Now().Before(roundEnd) {
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(300 * time.Millisecond) // a duplicate from a queue both still pull shows by now
		settled = got.shared(keys, "go-a", "go-b")
		emit("ROUND", round, settled)
	}
	deadline = time.Now().Add(o.timeout)
	for i := 0; i < o.n; i++ {
		sendTo(fmt.Sprintf("%s-msg-%d", o.prefix, i), i%queues)
	}
	keys := make([]string, o.n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s-msg-%d", o.prefix, i)
	}
	for !got.has(keys) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	_ = c1.Shutdown()
	_ = c2.Shutdown()
	emit("RESTART")
	c3 := newConsumer(o, "go-c", got)
	time.Sleep(o.linger)
	_ = c3.Shutdown()
}

// bad runs the bad-input cases and prints what the client raised for each.
func bad(o *options) {
	p := newProducer(o, producer.WithRetry(0))
	defer func() { _ = p.Shutdown() }()
	ctx := context.Background()

	// Random bytes do not compress: the record stays over the broker's maxMessageSize (4 MiB).
	body := make([]byte, 4*1024*1024+1024)
	rand.New(rand.NewSource(1)).Read(body)
	_, err := p.SendSync(ctx, primitive.NewMessage(o.topic, body))
	report("body-too-large", err)

	_, err = p.SendSync(ctx, primitive.NewMessage("bad topic!", []byte("x")))
	report("illegal-topic", err)

	_, err = p.SendSync(ctx, primitive.NewMessage(o.topic+"_missing", []byte("x")))
	report("topic-not-found", err)
}

func report(name string, err error) {
	if err == nil {
		emit("CASE", name, 0, "ok")
		return
	}
	emit("CASE", name, codeOf(err), err)
}

func main() {
	logFile := os.Getenv("ORBITMQ_GO_CLIENT_LOG")
	if logFile == "" {
		logFile = filepath.Join(os.TempDir(), "orbitmq-go-remoting-client.log")
	}
	rlog.SetLogLevel("warn")
	if err := rlog.SetOutputPath(logFile); err != nil {
		fmt.Fprintln(os.Stderr, "log file:", err)
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: remoting produce|consume|cluster|bad [flags]")
		os.Exit(2)
	}
	o := parse(os.Args[2:])
	switch os.Args[1] {
	case "produce":
		produce(o)
	case "consume":
		consume(o)
	case "cluster":
		cluster(o)
	case "bad":
		bad(o)
	default:
		fmt.Fprintln(os.Stderr, "unknown scenario", os.Args[1])
		os.Exit(2)
	}
}
