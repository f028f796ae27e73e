// Transactions with kafkajs for conformance/test_transactions.py: reads a JSON command on stdin
// {bootstrap, topic, transactionalId}; commits [c0..c4], aborts [a0..a2], commits [c5], then a
// second producer with the same transactional id fences the first, whose next transaction must
// fail. Prints one JSON line {ok, fencedError}.
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const cmd = JSON.parse(require("fs").readFileSync(0, "utf8"));
  const kafka = new Kafka({ clientId: "conformance-txn", brokers: cmd.bootstrap.split(","),
                            logLevel: logLevel.NOTHING, retry: { retries: 8 } });
  const opts = { transactionalId: cmd.transactionalId, idempotent: true, maxInFlightRequests: 1 };
  const p1 = kafka.producer(opts);
  await p1.connect();
  const send = async (values, commit) => {
    const txn = await p1.transaction();
    await txn.send({ topic: cmd.topic, messages: values.map((v) => ({ value: v, partition: 0 })) });
    if (commit) await txn.commit(); else await txn.abort();
  };
  await send(["c0", "c1", "c2", "c3", "c4"], true);
  await send(["a0", "a1", "a2"], false);
  await send(["c5"], true);
  const p2 = kafka.producer(opts);
  await p2.connect();
  const t2 = await p2.transaction(); // kafkajs' InitProducerId: bumps the epoch, fencing p1
  let fencedError = null;
  try {
    await send(["zombie"], true);
  } catch (e) {
    fencedError = `${e.name}: ${e.type || ""} ${e.message}`;
  }
  await t2.abort();
  await p1.disconnect().catch(() => {});
  await p2.disconnect();
  // kafkajs' own consumers: read_committed (its default) and read_uncommitted.
  const read = async (readUncommitted, expected) => {
    const consumer = kafka.consumer({ groupId: `${cmd.topic}-${readUncommitted}`, readUncommitted,
                                      maxWaitTimeInMs: 200 });
    await consumer.connect();
    await consumer.subscribe({ topic: cmd.topic, fromBeginning: true });
    const values = [];
    await consumer.run({ eachMessage: async ({ message }) => { values.push(message.value.toString()); } });
    const deadline = Date.now() + 20000;
    while (values.length < expected && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    await new Promise((r) => setTimeout(r, 1000));     // anything more would show up now
    await consumer.disconnect();
    return values;
  };
  const committed = await read(false, 6);
  const all = await read(true, 9);
  console.log(JSON.stringify({ ok: true, fencedError, committed, all }));
}

main().catch((e) => { console.log(JSON.stringify({ ok: false, error: String(e && e.stack || e) })); });
