// Command grpc drives Apache's RocketMQ 5 Go client (github.com/apache/rocketmq-clients/golang/v5)
// against an OrbitMQ proxy, one scenario per run, for tests/interop/go/test_go_grpc.py.
//
// Every outcome is one line on stdout, fields separated by single spaces:
//
//	SENT <key> <messageId> [<extra>]         a send (sync or async) succeeded
//	RECV <key> <messageId> <group> <attempt> <recvMs> <deliveryMs>
//	ACK <key>                                 an ack returned no error
//	CHECK <key> <resolution>                  the TransactionChecker answered a check-back
//	CASE <name> <code> <message>              a bad-input case; code -1 for a client-side error
//	ERROR <op> <code> <message>               an unexpected failure (the run exits 1)
//
// The client logs to the folder named by the rocketmq.client.logRoot environment variable
// (default: a folder under the system's temporary directory), never to stdout.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
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

// codeOf is the apache.rocketmq.v2.Code an error carries, or -1 for a client-side error.
func codeOf(err error) int32 {
	if status, ok := rmq.AsErrRpcStatus(err); ok {
		return status.GetCode()
	}
	return -1
}

func fail(op string, err error) {
	emit("ERROR", op, codeOf(err), err)
	os.Exit(1)
}

type options struct {
	endpoint, topic, group, kind, prefix string
	n, groups                            int
	delay, timeout, linger, invisible    time.Duration
}

func parse(args []string) *options {
	o := &options{}
	fs := flag.NewFlagSet("grpc", flag.ExitOnError)
	fs.StringVar(&o.endpoint, "endpoint", "127.0.0.1:8081", "the proxy's gRPC endpoint")
	fs.StringVar(&o.topic, "topic", "", "topic")
	fs.StringVar(&o.group, "group", "", "consumer group")
	fs.StringVar(&o.kind, "kind", "normal", "produce: normal | fifo | delay")
	fs.StringVar(&o.prefix, "prefix", "k", "prefix of the message keys")
	fs.IntVar(&o.n, "n", 4, "messages to send (per way) or to receive")
	fs.IntVar(&o.groups, "groups", 2, "fifo: message groups")
	fs.DurationVar(&o.delay, "delay", 2*time.Second, "delay: how far ahead the delivery timestamp is")
	fs.DurationVar(&o.timeout, "timeout", 20*time.Second, "how long to wait for the messages")
	fs.DurationVar(&o.linger, "linger", 0, "consume: keep receiving this long after the n-th message")
	fs.DurationVar(&o.invisible, "invisible", 10*time.Second, "consume: invisible duration")
	_ = fs.Parse(args)
	return o
}

func config(o *options, group string) *rmq.Config {
	return &rmq.Config{Endpoint: o.endpoint, ConsumerGroup: group, Credentials: &credentials.SessionCredentials{}}
}

func startProducer(o *options, extra ...rmq.ProducerOption) rmq.Producer {
	p, err := rmq.NewProducer(config(o, ""), append([]rmq.ProducerOption{rmq.WithTopics(o.topic)}, extra...)...)
	if err != nil {
		fail("new-producer", err)
	}
	if err := p.Start(); err != nil {
		fail("start-producer", err)
	}
	return p
}

func startConsumer(o *options, group, topic string) rmq.SimpleConsumer {
	c, err := rmq.NewSimpleConsumer(config(o, group), rmq.WithAwaitDuration(2*time.Second),
		rmq.WithSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	if err != nil {
		fail("new-consumer", err)
	}
	if err := c.Start(); err != nil {
		fail("start-consumer", err)
	}
	return c
}

func keyOf(keys []string) string {
	if len(keys) == 0 {
		return "-"
	}
	return keys[0]
}

// produce sends n messages of one kind synchronously, then (normal only) n asynchronously.
func produce(o *options) {
	p := startProducer(o)
	defer p.GracefulStop()
	ctx := context.Background()
	for i := 0; i < o.n; i++ {
		msg := &rmq.Message{Topic: o.topic, Body: []byte(fmt.Sprintf("body-%d", i))}
		key := fmt.Sprintf("%s-%d", o.prefix, i)
		msg.SetKeys(key)
		msg.SetTag("go")
		extra := "-"
		switch o.kind {
		case "fifo":
			extra = fmt.Sprintf("%s-group-%d", o.prefix, i%o.groups)
			msg.SetMessageGroup(extra)
		case "delay":
			at := time.Now().Add(o.delay)
			msg.SetDelayTimestamp(at)
			extra = fmt.Sprint(at.UnixMilli())
		}
		receipts, err := p.Send(ctx, msg)
		if err != nil {
			fail("send", err)
		}
		emit("SENT", key, receipts[0].MessageID, extra)
	}
	if o.kind != "normal" {
		return
	}
	var wg sync.WaitGroup
	for i := 0; i < o.n; i++ {
		msg := &rmq.Message{Topic: o.topic, Body: []byte(fmt.Sprintf("async-body-%d", i))}
		key := fmt.Sprintf("%s-async-%d", o.prefix, i)
		msg.SetKeys(key)
		wg.Add(1)
		p.SendAsync(ctx, msg, func(_ context.Context, receipts []*rmq.SendReceipt, err error) {
			defer wg.Done()
			if err != nil {
				emit("ERROR", "send-async", codeOf(err), err)
				return
			}
			emit("SENT", key, receipts[0].MessageID, "async")
		})
	}
	wg.Wait()
}

// receiveUntil receives and acks until n messages came, then lingers; each message is printed
// in the order the consumer got it.
func receiveUntil(c rmq.SimpleConsumer, o *options) int {
	got := 0
	deadline := time.Now().Add(o.timeout)
	var lingerEnd time.Time
	for time.Now().Before(deadline) {
		if got >= o.n {
			if lingerEnd.IsZero() {
				if o.linger <= 0 {
					break
				}
				lingerEnd = time.Now().Add(o.linger)
			}
			if time.Now().After(lingerEnd) {
				break
			}
		}
		views, err := c.Receive(context.Background(), 16, o.invisible)
		if err != nil {
			if codeOf(err) == 40401 { // MESSAGE_NOT_FOUND: the long poll ended empty
				continue
			}
			if strings.Contains(err.Error(), "DEADLINE_EXCEEDED") {
				continue
			}
			fail("receive", err)
		}
		for _, v := range views {
			delivery := int64(0)
			if t := v.GetDeliveryTimestamp(); t != nil {
				delivery = t.UnixMilli()
			}
			key := keyOf(v.GetKeys())
			mg := "-"
			if g := v.GetMessageGroup(); g != nil {
				mg = *g
			}
			emit("RECV", key, v.GetMessageId(), mg, v.GetDeliveryAttempt(), time.Now().UnixMilli(), delivery)
			if err := c.Ack(context.Background(), v); err != nil {
				fail("ack", err)
			}
			emit("ACK", key)
			got++
		}
	}
	return got
}

func consume(o *options) {
	c := startConsumer(o, o.group, o.topic)
	defer c.GracefulStop()
	receiveUntil(c, o)
}

// transaction sends three half messages: one committed, one rolled back, one left open for the
// broker's check-back, which the TransactionChecker answers with COMMIT; then a SimpleConsumer
// of o.group receives what was committed (two messages, then o.linger more).
func transaction(o *options) {
	checked := make(chan struct{}, 16)
	checker := &rmq.TransactionChecker{Check: func(v *rmq.MessageView) rmq.TransactionResolution {
		key := keyOf(v.GetKeys())
		if strings.HasSuffix(key, "-unknown") {
			emit("CHECK", key, "COMMIT")
			checked <- struct{}{}
			return rmq.COMMIT
		}
		emit("CHECK", key, "ROLLBACK")
		return rmq.ROLLBACK
	}}
	p := startProducer(o, rmq.WithTransactionChecker(checker))
	defer p.GracefulStop()
	for _, end := range []string{"commit", "rollback", "unknown"} {
		msg := &rmq.Message{Topic: o.topic, Body: []byte("tx-" + end)}
		key := o.prefix + "-" + end
		msg.SetKeys(key)
		tx := p.BeginTransaction()
		receipts, err := p.SendWithTransaction(context.Background(), msg, tx)
		if err != nil {
			fail("send-half", err)
		}
		emit("SENT", key, receipts[0].MessageID, receipts[0].TransactionId)
		switch end {
		case "commit":
			err = tx.Commit()
		case "rollback":
			err = tx.RollBack()
		}
		if err != nil {
			fail("end-"+end, err)
		}
	}
	select {
	case <-checked:
	case <-time.After(o.timeout):
		fail("check-back", errors.New("no check-back arrived"))
	}
	// The checker's answer goes out after Check returns: consume while the producer still runs.
	c := startConsumer(o, o.group, o.topic)
	defer c.GracefulStop()
	o.n = 2
	receiveUntil(c, o)
}

// bad runs the bad-input cases one after another and prints what the client raised for each.
func bad(o *options) {
	ctx := context.Background()
	p := startProducer(o)
	defer p.GracefulStop()

	big := &rmq.Message{Topic: o.topic, Body: make([]byte, 4*1024*1024+1)}
	_, err := p.Send(ctx, big)
	report("body-too-large", err)

	_, err = p.Send(ctx, &rmq.Message{Topic: "bad topic!", Body: []byte("x")})
	report("illegal-topic", err)

	_, err = p.Send(ctx, &rmq.Message{Topic: o.topic + "_missing", Body: []byte("x")})
	report("topic-not-found", err)

	c, err := rmq.NewSimpleConsumer(config(o, "bad group!"), rmq.WithAwaitDuration(time.Second),
		rmq.WithSubscriptionExpressions(map[string]*rmq.FilterExpression{o.topic: rmq.SUB_ALL}))
	if err == nil {
		if err = c.Start(); err == nil {
			_, err = c.Receive(ctx, 1, 10*time.Second)
			c.GracefulStop()
		}
	}
	report("illegal-group", err)

	// An expired receipt handle: received with the shortest invisible duration, used after it.
	msg := &rmq.Message{Topic: o.topic, Body: []byte("expire-me")}
	msg.SetKeys(o.prefix + "-expire")
	if _, err := p.Send(ctx, msg); err != nil {
		fail("send", err)
	}
	c = startConsumer(o, o.group, o.topic)
	defer c.GracefulStop()
	var view *rmq.MessageView
	for deadline := time.Now().Add(o.timeout); view == nil && time.Now().Before(deadline); {
		views, err := c.Receive(ctx, 1, o.invisible)
		if err != nil && codeOf(err) != 40401 {
			fail("receive", err)
		}
		if len(views) > 0 {
			view = views[0]
		}
	}
	if view == nil {
		fail("receive", errors.New("the message to expire never came"))
	}
	emit("RECV", keyOf(view.GetKeys()), view.GetMessageId(), "-", view.GetDeliveryAttempt(), time.Now().UnixMilli(), 0)
	time.Sleep(o.invisible + 500*time.Millisecond)
	report("expired-change-invisible", c.ChangeInvisibleDuration(view, 5*time.Second))
	// The client drops an ack's status (SimpleConsumer.Ack returns nil whatever the code): the
	// message coming again shows that the expired ack did not take.
	report("expired-ack", c.Ack(ctx, view))
	o.n, o.linger = 1, 0
	receiveUntil(c, o)
}

func report(name string, err error) {
	if err == nil {
		emit("CASE", name, 0, "ok")
		return
	}
	emit("CASE", name, codeOf(err), err)
}

func main() {
	if os.Getenv(rmq.CLIENT_LOG_ROOT) == "" {
		_ = os.Setenv(rmq.CLIENT_LOG_ROOT, filepath.Join(os.TempDir(), "orbitmq-go-grpc-client"))
		rmq.ResetLogger()
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: grpc produce|consume|transaction|bad [flags]")
		os.Exit(2)
	}
	o := parse(os.Args[2:])
	switch os.Args[1] {
	case "produce":
		produce(o)
	case "consume":
		consume(o)
	case "transaction":
		transaction(o)
	case "bad":
		bad(o)
	default:
		fmt.Fprintln(os.Stderr, "unknown scenario", os.Args[1])
		os.Exit(2)
	}
}
