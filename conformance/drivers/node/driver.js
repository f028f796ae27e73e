#!/usr/bin/env node
// kafkajs 2.2 driver for the minibroker conformance suite.
// Reads one JSON command on stdin (or argv[2]), prints one JSON result line on stdout.
// Keys/values travel base64-encoded. Logs go to stderr. Every operation is bounded by cmd.timeout.
'use strict'

const {
  Kafka, CompressionTypes, CompressionCodecs, ConfigResourceTypes, Partitioners, logLevel, AssignerProtocol
} = require('kafkajs')
const fs = require('fs')
const SnappyCodec = require('kafkajs-snappy')
const lz4 = require('lz4js')
const { ZstdCodec } = require('zstd-codec')

// Codecs from npm, pure JS/wasm (no native build): snappy via kafkajs-snappy (snappyjs),
// lz4 (frame format, as Kafka uses) via lz4js, zstd via zstd-codec (emscripten).
CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
CompressionCodecs[CompressionTypes.LZ4] = () => ({
  async compress (encoder) { return Buffer.from(lz4.compress(encoder.buffer)) },
  async decompress (buffer) { return Buffer.from(lz4.decompress(buffer)) }
})
let zstd = null
const zstdReady = new Promise(resolve => ZstdCodec.run(z => {
  zstd = { simple: new z.Simple(), streaming: new z.Streaming() }
  resolve()
}))
CompressionCodecs[CompressionTypes.ZSTD] = () => ({
  async compress (encoder) { await zstdReady; return Buffer.from(zstd.simple.compress(encoder.buffer, 3)) },
  // Streaming decompression also handles frames without a content size (librdkafka writes those).
  async decompress (buffer) { await zstdReady; return Buffer.from(zstd.streaming.decompress(buffer)) }
})

const CODECS = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD
}

const b64 = b => (b === null || b === undefined ? null : Buffer.from(b).toString('base64'))
const unb64 = s => (s === null || s === undefined ? null : Buffer.from(s, 'base64'))

function client (cmd) {
  return new Kafka({
    clientId: 'conformance-kafkajs',
    brokers: cmd.bootstrap.split(','),
    // Security (conformance/test_security.py): ssl {ca, cert, key} file paths, sasl as kafkajs takes it.
    ...(cmd.ssl ? { ssl: Object.fromEntries(Object.entries(cmd.ssl).map(([k, path]) => [k, fs.readFileSync(path)])) } : {}),
    ...(cmd.sasl ? { sasl: cmd.sasl } : {}),
    connectionTimeout: 5000,
    requestTimeout: 15000,
    retry: { retries: 8, initialRetryTime: 100, maxRetryTime: 1000 },
    logLevel: logLevel.WARN,
    logCreator: () => ({ namespace, level, label, log }) =>
      process.stderr.write(`[kafkajs ${label} ${namespace}] ${log.message} ${JSON.stringify(log)}\n`)
  })
}

async function withAdmin (cmd, fn) {
  const admin = client(cmd).admin()
  await admin.connect()
  try { return await fn(admin) } finally { await admin.disconnect() }
}

const ops = {
  async create_topic (cmd) {
    return withAdmin(cmd, async admin => {
      const configEntries = Object.entries(cmd.configs || {}).map(([name, value]) => ({ name, value }))
      const created = await admin.createTopics({
        topics: [{ topic: cmd.topic, numPartitions: cmd.partitions, replicationFactor: cmd.rf, configEntries }],
        waitForLeaders: true,
        timeout: Math.floor(cmd.timeout * 1000)
      })
      if (!created) throw new Error(`topic ${cmd.topic} already exists`)
      return null
    })
  },

  async produce (cmd) {
    const kafka = client(cmd)
    const producer = kafka.producer({
      createPartitioner: Partitioners.DefaultPartitioner,
      idempotent: !!cmd.idempotent,
      maxInFlightRequests: cmd.idempotent ? 1 : undefined,
      allowAutoTopicCreation: false
    })
    await producer.connect()
    try {
      // Partition each message with kafkajs' own default (Java-compatible murmur2) partitioner, so
      // that every record's offset is known: baseOffset + its index within its partition.
      const admin = kafka.admin()
      await admin.connect()
      let partitionMetadata
      try {
        const md = await admin.fetchTopicMetadata({ topics: [cmd.topic] })
        partitionMetadata = md.topics[0].partitions
      } finally { await admin.disconnect() }
      const partitioner = Partitioners.DefaultPartitioner()
      const messages = cmd.records.map(([k, v]) => {
        const message = { key: unb64(k), value: unb64(v) }
        message.partition = partitioner({ topic: cmd.topic, partitionMetadata, message })
        return message
      })
      const acks = cmd.acks === 'all' ? -1 : Number(cmd.acks)
      const meta = await producer.send({
        topic: cmd.topic, acks, compression: CODECS[cmd.codec], timeout: 15000, messages
      })
      const base = {}
      for (const m of meta) {
        if (m.errorCode) throw new Error(`produce error ${m.errorCode} on partition ${m.partition}`)
        base[m.partition] = BigInt(m.baseOffset)
      }
      const seen = {}
      return messages.map(m => {
        const i = seen[m.partition] || 0
        seen[m.partition] = i + 1
        return [m.partition, Number(base[m.partition] + BigInt(i))]
      })
    } finally { await producer.disconnect() }
  },

  // kafkajs has no manual partition assignment: read through a fresh consumer group (one member,
  // so it is assigned every partition), from the beginning, without committing.
  async consume_assigned (cmd) {
    const kafka = client(cmd)
    const consumer = kafka.consumer({
      groupId: `conformance-kafkajs-${cmd.topic}-${process.pid}-${Date.now()}`,
      sessionTimeout: 10000, rebalanceTimeout: 10000, heartbeatInterval: 1000,
      maxWaitTimeInMs: 200, allowAutoTopicCreation: false
    })
    const wanted = new Set(cmd.partitions)
    const out = []
    await consumer.connect()
    try {
      await consumer.subscribe({ topics: [cmd.topic], fromBeginning: true })
      let done
      const finished = new Promise(resolve => { done = resolve })
      await consumer.run({
        autoCommit: false,
        eachBatch: async ({ batch }) => {
          if (!wanted.has(batch.partition)) return
          for (const m of batch.messages) {
            out.push([batch.partition, Number(m.offset), b64(m.key), b64(m.value)])
          }
          if (out.length >= cmd.expected_count) done()
        }
      })
      const timer = setTimeout(done, Math.max(0, cmd.timeout * 1000 - 2000))
      await finished
      clearTimeout(timer)
      return out
    } finally { await consumer.disconnect() }
  },

  async list_offsets (cmd) {
    return withAdmin(cmd, async admin => {
      const res = {}
      for (const p of await admin.fetchTopicOffsets(cmd.topic)) {
        res[p.partition] = [Number(p.low), Number(p.high)]
      }
      return res
    })
  },

  async partition_count (cmd) {
    return withAdmin(cmd, async admin => {
      const md = await admin.fetchTopicMetadata({ topics: [cmd.topic] })
      return md.topics[0].partitions.length
    })
  },

  async describe_configs (cmd) {
    return withAdmin(cmd, async admin => {
      const res = await admin.describeConfigs({
        includeSynonyms: false,
        resources: [{ type: ConfigResourceTypes.TOPIC, name: cmd.topic }]
      })
      const out = {}
      for (const r of res.resources) {
        if (r.errorCode) throw new Error(`describeConfigs ${cmd.topic}: error ${r.errorCode} ${r.errorMessage}`)
        for (const e of r.configEntries) out[e.configName] = e.configValue
      }
      return out
    })
  },

  async create_partitions (cmd) {
    return withAdmin(cmd, async admin => {
      await admin.createPartitions({
        topicPartitions: [{ topic: cmd.topic, count: cmd.total }], timeout: Math.floor(cmd.timeout * 1000)
      })
      return null
    })
  },

  async delete_topic (cmd) {
    return withAdmin(cmd, async admin => {
      await admin.deleteTopics({ topics: [cmd.topic], timeout: Math.floor(cmd.timeout * 1000) })
      return null
    })
  },

  async list_topics (cmd) {
    return withAdmin(cmd, admin => admin.listTopics())
  },

  // Server-side group scenario (conformance/test_groups.py): `members` consumers in one group
  // on a PARTITIONS-partition topic, all in this process. Phases: stable assignment (GROUP_JOIN
  // events, cross-checked with DescribeGroups) -> batch 0 -> the last member stops committing ->
  // batch 1 -> it leaves (disconnect: LeaveGroup, no commit) -> stable again -> batch 2 ->
  // everyone closes -> batch 3 -> a new member reads from the committed offsets. Every event
  // gets a sequence number; the Python side checks the invariants on the returned trace.
  async group_scenario (cmd) {
    const kafka = client(cmd)
    const topic = cmd.topic
    const stepMs = Math.floor((cmd.step_timeout || 30) * 1000)
    let seq = 0
    const trace = {
      produced: [], consumed: [], commits: [], rebalances: [], errors: []
    }
    const admin = kafka.admin()
    await admin.connect()
    const all = []
    const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))
    const waitUntil = async (pred, what, interval = 100) => {
      const end = Date.now() + stepMs
      for (;;) {
        const got = await pred()
        if (got) return got
        if (Date.now() > end) throw new Error(`timed out after ${stepMs} ms waiting for ${what}`)
        await sleep(interval)
      }
    }

    const member = async name => {
      const consumer = kafka.consumer({
        groupId: cmd.group,
        sessionTimeout: 6000,
        rebalanceTimeout: 10000,
        heartbeatInterval: 500,
        maxWaitTimeInMs: 200,
        allowAutoTopicCreation: false
      })
      const m = { name, consumer, current: [], assignCount: 0, commitEnabled: true }
      consumer.on(consumer.events.GROUP_JOIN, e => {
        m.current = (e.payload.memberAssignment[topic] || []).slice().sort((a, b) => a - b)
        m.assignCount++
        trace.rebalances.push([seq++, name, 'assigned', m.current])
      })
      consumer.on(consumer.events.REBALANCING, () => {
        trace.rebalances.push([seq++, name, 'revoked', m.current])
        m.current = []
      })
      await consumer.connect()
      await consumer.subscribe({ topics: [topic], fromBeginning: true })
      await consumer.run({
        autoCommit: false,
        eachBatch: async ({ batch }) => {
          if (batch.messages.length === 0) return
          let last = -1
          for (const msg of batch.messages) {
            trace.consumed.push([seq++, name, batch.partition, Number(msg.offset), b64(msg.key), b64(msg.value)])
            last = Math.max(last, Number(msg.offset))
          }
          if (!m.commitEnabled) return
          try {
            await consumer.commitOffsets([{ topic, partition: batch.partition, offset: String(last + 1) }])
            trace.commits.push([seq++, name, { [batch.partition]: last + 1 }])
          } catch (e) {
            trace.errors.push([seq++, name, `commit ${e.name}: ${e.message}`])
          }
        }
      })
      all.push(m)
      return m
    }
    const close = async m => {
      if (m.closed) return
      m.closed = true
      await m.consumer.disconnect()
    }

    const consumedPositions = () => new Set(trace.consumed.map(([, , p, o]) => `${p}:${o}`))
    const consumedAll = batchIds => () => {
      const seen = consumedPositions()
      return batchIds.every(b => trace.produced[b].every(([p, o]) => seen.has(`${p}:${o}`)))
    }
    const ends = async () => {
      const out = {}
      for (const p of await admin.fetchTopicOffsets(topic)) out[p.partition] = Number(p.high)
      return out
    }
    const committedAll = (ms, endOffsets) => () => {
      const names = new Set(ms.map(m => m.name))
      const got = {}
      for (const [, m, offs] of trace.commits) {
        if (!names.has(m)) continue
        for (const [p, o] of Object.entries(offs)) got[p] = Math.max(got[p] || 0, o)
      }
      return ms.every(m => m.current.every(p => (got[p] || 0) === endOffsets[p]))
    }
    const describe = async () => {
      const { groups } = await admin.describeGroups([cmd.group])
      const g = groups[0]
      const members = {}
      for (const mem of g.members) {
        const decoded = AssignerProtocol.MemberAssignment.decode(mem.memberAssignment)
        members[mem.memberId] = ((decoded && decoded.assignment[topic]) || []).slice().sort((a, b) => a - b)
      }
      return { state: g.state, protocol: g.protocol, members }
    }
    const stableAndDescribed = async (ms, baseline) => waitUntil(async () => {
      if (baseline && ms.some(m => m.assignCount <= baseline[m.name])) return null
      const cur = {}
      for (const m of ms) cur[m.name] = m.current
      const owned = [].concat(...Object.values(cur)).sort((a, b) => a - b)
      if (owned.length !== cmd.partitions || owned.some((p, i) => p !== i) ||
          Object.values(cur).some(ps => ps.length === 0)) return null
      const g = await describe()
      if (g.state !== 'Stable' || Object.keys(g.members).length !== ms.length) return null
      return [cur, g]
    }, `a stable ${ms.length}-member assignment`, 200)
    const produce = async b => {
      trace.produced.push(await ops.produce({
        bootstrap: cmd.bootstrap, topic, codec: 'none', acks: 'all', records: cmd.batches[b]
      }))
    }

    try {
      const members = []
      for (let i = 0; i < cmd.members; i++) members.push(await member(`m${i}`))
      ;[trace.stable_a, trace.group_a] = await stableAndDescribed(members)
      await produce(0)
      await waitUntil(consumedAll([0]), 'batch 1 consumed')
      await waitUntil(committedAll(members, await ends()), 'batch 1 committed')
      const leaver = members[members.length - 1]
      const stay = members.slice(0, -1)
      leaver.commitEnabled = false
      await produce(1)
      await waitUntil(consumedAll([0, 1]), 'batch 2 consumed')
      await waitUntil(committedAll(stay, await ends()), 'batch 2 committed by the staying members')
      const baseline = {}
      for (const m of stay) baseline[m.name] = m.assignCount
      trace.leave_seq = seq++
      trace.left = leaver.name
      await close(leaver)
      ;[trace.stable_b, trace.group_b] = await stableAndDescribed(stay, baseline)
      await produce(2)
      await waitUntil(consumedAll([0, 1, 2]), 'batches 1-3 consumed')
      const e = await ends()
      await waitUntil(committedAll(stay, e), 'batch 3 committed')
      for (const m of stay) await close(m)
      trace.ends_before_new = e
      const committed = {}
      for (const t of await admin.fetchOffsets({ groupId: cmd.group, topics: [topic] })) {
        for (const p of t.partitions) if (Number(p.offset) >= 0) committed[p.partition] = Number(p.offset)
      }
      trace.committed_before_new = committed
      await produce(3)
      trace.new_seq = seq++
      const fresh = await member(`m${cmd.members}`)
      await waitUntil(consumedAll([3]), 'batch 4 consumed by the new member')
      trace.new_assignment = fresh.current
      await close(fresh)
      return trace
    } catch (e) {
      e.message = `${e.message}; trace so far: ${JSON.stringify({ rebalances: trace.rebalances, errors: trace.errors, consumed: trace.consumed.length })}`
      throw e
    } finally {
      for (const m of all) { try { await close(m) } catch (e) {} }
      await admin.disconnect()
    }
  }
}

async function readStdin () {
  const chunks = []
  for await (const c of process.stdin) chunks.push(c)
  return Buffer.concat(chunks).toString('utf8')
}

async function main () {
  const cmd = JSON.parse(process.argv[2] || await readStdin())
  cmd.timeout = cmd.timeout || 30
  const killer = setTimeout(() => {
    process.stdout.write(JSON.stringify({ ok: false, error: `timed out after ${cmd.timeout}s` }) + '\n')
    process.exit(3)
  }, cmd.timeout * 1000)
  try {
    const result = await ops[cmd.op](cmd)
    clearTimeout(killer)
    // Exit once the line is flushed: a large result (group_scenario) outgrows the pipe buffer.
    process.stdout.write(JSON.stringify({ ok: true, result }) + '\n', () => process.exit(0))
  } catch (e) {
    process.stdout.write(JSON.stringify({ ok: false, error: `${e.name}: ${e.message}` }) + '\n')
    clearTimeout(killer)
    process.exit(2)
  }
}

main()
