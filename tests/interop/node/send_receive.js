// Sends messages and receives/acks them through an OrbitMQ proxy with the official RocketMQ 5
// Node.js client. Usage: node send_receive.js <endpoint> <topic> <group> <count> [accessKey secretKey]
// Prints one JSON line {sent: [...ids], received: [{id, body, tag, keys, props}], acked: n}.
'use strict';
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');

const quiet = { info() {}, warn() {}, debug() {}, error: console.error };

async function main() {
  const [endpoints, topic, group, countArg, accessKey, accessSecret] = process.argv.slice(2);
  const count = Number(countArg);
  // ACL 2.0: the client signs every request when given credentials
  const sessionCredentials = accessKey ? { accessKey, accessSecret } : undefined;
  const producer = new Producer({ endpoints, sessionCredentials, logger: quiet });
  await producer.startup();
  const sent = [];
  for (let i = 0; i < count; i++) {
    const receipt = await producer.send({
      topic, tag: 'node', keys: [`nk${i}`], properties: new Map([['i', String(i)]]),
      body: Buffer.from(`node message ${i}`),
    });
    sent.push(receipt.messageId);
  }
  await producer.shutdown();

  const consumer = new SimpleConsumer({
    endpoints, consumerGroup: group, subscriptions: new Map([[topic, 'node']]), awaitDuration: 2000,
    sessionCredentials, logger: quiet,
  });
  await consumer.startup();
  const received = [];
  let acked = 0;
  const deadline = Date.now() + 20000;
  while (received.length < count && Date.now() < deadline) {
    const messages = await consumer.receive(16, 15000);
    for (const m of messages) {
      received.push({ id: m.messageId, body: m.body.toString(), tag: m.tag, keys: m.keys,
        props: Object.fromEntries(m.properties) });
      await consumer.ack(m);
      acked++;
    }
  }
  await consumer.shutdown();
  console.log(JSON.stringify({ sent, received, acked }));
}

main().then(() => process.exit(0), (err) => { console.error('FAILED', err); process.exit(1); });
