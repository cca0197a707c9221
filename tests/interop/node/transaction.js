// Sends two transactional messages through an OrbitMQ proxy with the official RocketMQ 5
// Node.js client, commits one and rolls the other back.
// Usage: node transaction.js <endpoint> <topic>
// Prints one JSON line {committed: {id, transactionId}, rolledBack: {id, transactionId}}.
'use strict';
const { Producer } = require('rocketmq-client-nodejs');

const quiet = { info() {}, warn() {}, debug() {}, error: console.error };

async function main() {
  const [endpoints, topic] = process.argv.slice(2);
  // Both transactions are ended here; a check-back would mean the proxy lost one.
  const checker = { async check() { throw new Error('unexpected check-back'); } };
  const producer = new Producer({ endpoints, topics: [topic], checker, logger: quiet });
  await producer.startup();
  const result = {};
  for (const [name, body] of [['committed', 'node tx commit'], ['rolledBack', 'node tx rollback']]) {
    const transaction = producer.beginTransaction();
    const receipt = await producer.send({ topic, tag: 'nodetx', body: Buffer.from(body) }, transaction);
    if (name === 'committed') {
      await transaction.commit();
    } else {
      await transaction.rollback();
    }
    result[name] = { id: receipt.messageId, transactionId: receipt.transactionId };
  }
  await producer.shutdown();
  console.log(JSON.stringify(result));
}

main().then(() => process.exit(0), (err) => { console.error('FAILED', err); process.exit(1); });
