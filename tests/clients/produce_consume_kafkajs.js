#!/usr/bin/env node
// kafkajs 2.2.4 (non-flexible protocol versions only: Produce <= 7, Fetch <= 11,
// Metadata <= 6, ApiVersions <= 2) against a strom broker.
//
// Usage: node produce_consume_kafkajs.js HOST:PORT
//
// 1. Admin: create a topic (a duplicate create returns false, kafkajs's answer to
//    TOPIC_ALREADY_EXISTS), list it, fetch its offsets, delete it.
// 2. Produce N records with acks=-1 (uncompressed and gzip, the codecs kafkajs has without
//    plugins); the base offsets must be contiguous; admin.fetchTopicOffsets must report
//    the high watermark, and fetchTopicOffsetsByTimestamp the first offset at a timestamp.
// 3. Consume: kafkajs can only consume through a consumer group. The consume part runs
//    when the broker advertises the group APIs (FindCoordinator, JoinGroup, SyncGroup,
//    Heartbeat, OffsetFetch, OffsetCommit, LeaveGroup) and prints
//    "SKIPPED consume part" otherwise, so it switches on by itself when groups land.
//
// Exits 0 on success; on failure prints what differed and exits 1.

'use strict'

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'

const net = require('net')
const { Kafka, logLevel, CompressionTypes } = require('kafkajs')

const RECORDS = 1000
const BATCH = 100
const TIMEOUT_MS = 60000

const GROUP_APIS = {
  OffsetCommit: 8,
  OffsetFetch: 9,
  FindCoordinator: 10,
  JoinGroup: 11,
  Heartbeat: 12,
  LeaveGroup: 13,
  SyncGroup: 14,
}

function fail(message) {
  console.log(`FAIL: ${message}`)
  process.exit(1)
}

function check(condition, message) {
  if (!condition) fail(message)
}

const valueOf = (codec, i) => `kafkajs-${codec}-${String(i).padStart(5, '0')}-${'q'.repeat(i % 29)}`
const keyOf = i => `k${i}`

// The API keys the broker advertises, read with a hand-built ApiVersions v0 request.
function advertisedApis(host, port) {
  return new Promise((resolve, reject) => {
    const clientId = Buffer.from('kafkajs-test-probe')
    const body = Buffer.alloc(2 + 2 + 4 + 2 + clientId.length)
    body.writeInt16BE(18, 0) // ApiVersions
    body.writeInt16BE(0, 2) // v0
    body.writeInt32BE(1, 4) // correlation id
    body.writeInt16BE(clientId.length, 8)
    clientId.copy(body, 10)
    const frame = Buffer.concat([Buffer.alloc(4), body])
    frame.writeInt32BE(body.length, 0)
    const socket = net.connect(port, host, () => socket.write(frame))
    let received = Buffer.alloc(0)
    const timer = setTimeout(() => {
      socket.destroy()
      reject(new Error('ApiVersions probe timed out'))
    }, TIMEOUT_MS)
    socket.on('data', chunk => {
      received = Buffer.concat([received, chunk])
      if (received.length < 4 || received.length < 4 + received.readInt32BE(0)) return
      clearTimeout(timer)
      socket.end()
      const errorCode = received.readInt16BE(8)
      if (errorCode !== 0) return reject(new Error(`ApiVersions error ${errorCode}`))
      const count = received.readInt32BE(10)
      const apis = new Map()
      for (let i = 0; i < count; i++) {
        const at = 14 + i * 6
        apis.set(received.readInt16BE(at), [received.readInt16BE(at + 2), received.readInt16BE(at + 4)])
      }
      resolve(apis)
    })
    socket.on('error', e => {
      clearTimeout(timer)
      reject(e)
    })
  })
}

async function produce(kafka, topic, codec, compression) {
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  const offsets = []
  for (let start = 0; start < RECORDS; start += BATCH) {
    const messages = []
    for (let i = start; i < start + BATCH; i++) {
      messages.push({ key: keyOf(i), value: valueOf(codec, i), partition: 0, timestamp: String(1700000000000 + i) })
    }
    const result = await producer.send({ topic, acks: -1, compression, timeout: TIMEOUT_MS, messages })
    check(result.length === 1, `${codec}: send returned ${JSON.stringify(result)}`)
    check(result[0].errorCode === 0, `${codec}: send error ${result[0].errorCode}`)
    offsets.push(Number(result[0].baseOffset))
  }
  await producer.disconnect()
  offsets.forEach((base, n) =>
    check(base === n * BATCH, `${codec}: batch ${n} written at base offset ${base}, expected ${n * BATCH}`)
  )
}

async function consume(kafka, topic, codec) {
  const consumer = kafka.consumer({ groupId: `kafkajs-${topic}` })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const received = []
  let done
  const finished = new Promise(resolve => (done = resolve))
  await consumer.run({
    eachMessage: async ({ message }) => {
      received.push(message)
      if (received.length >= RECORDS) done()
    },
  })
  const timer = setTimeout(done, TIMEOUT_MS)
  await finished
  clearTimeout(timer)
  await consumer.disconnect()
  check(received.length === RECORDS, `${codec}: consumed ${received.length} of ${RECORDS}`)
  received.forEach((m, i) => {
    check(Number(m.offset) === i, `${codec}: record ${i} read at offset ${m.offset}`)
    check(m.key.toString() === keyOf(i), `${codec}: offset ${i} key ${m.key}`)
    check(m.value.toString() === valueOf(codec, i), `${codec}: offset ${i} value differs`)
  })
}

async function main() {
  const bootstrap = process.argv[2]
  if (!bootstrap) fail('usage: node produce_consume_kafkajs.js HOST:PORT')
  const [host, port] = [bootstrap.slice(0, bootstrap.lastIndexOf(':')), Number(bootstrap.split(':').pop())]

  const apis = await advertisedApis(host, port)
  const missingGroupApis = Object.entries(GROUP_APIS)
    .filter(([, key]) => !apis.has(key))
    .map(([name]) => name)

  const kafka = new Kafka({
    clientId: 'strom-kafkajs-test',
    brokers: [bootstrap],
    logLevel: logLevel.WARN,
    retry: { retries: 3 },
  })
  const admin = kafka.admin()
  await admin.connect()

  const codecs = [
    ['none', CompressionTypes.None],
    ['gzip', CompressionTypes.GZIP],
  ]
  const topics = codecs.map(([codec]) => `kafkajs-${codec}`)
  for (const topic of topics) {
    const created = await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], timeout: TIMEOUT_MS })
    check(created === true, `createTopics(${topic}) returned ${created}`)
  }
  const again = await admin.createTopics({ topics: [{ topic: topics[0], numPartitions: 1 }], timeout: TIMEOUT_MS })
  check(again === false, `duplicate createTopics returned ${again}, expected false (TOPIC_ALREADY_EXISTS)`)
  console.log('ok: createTopics; a duplicate gets TOPIC_ALREADY_EXISTS')
  const listed = await admin.listTopics()
  topics.forEach(t => check(listed.includes(t), `listTopics misses ${t}: ${listed}`))

  for (const [i, [codec, compression]] of codecs.entries()) {
    const topic = topics[i]
    await produce(kafka, topic, codec, compression)
    const offsets = await admin.fetchTopicOffsets(topic)
    check(offsets.length === 1, `fetchTopicOffsets: ${JSON.stringify(offsets)}`)
    check(
      Number(offsets[0].high) === RECORDS && Number(offsets[0].low) === 0,
      `${codec}: offsets ${JSON.stringify(offsets)}, expected low 0 and high ${RECORDS}`
    )
    const byTime = await admin.fetchTopicOffsetsByTimestamp(topic, 1700000000000 + 500)
    check(Number(byTime[0].offset) === 500, `${codec}: offset at timestamp +500 is ${JSON.stringify(byTime)}`)
    console.log(`ok: ${codec}: ${RECORDS} records produced (acks=-1), offsets listed`)

    if (missingGroupApis.length === 0) {
      await consume(kafka, topic, codec)
      console.log(`ok: ${codec}: consumed back through a consumer group`)
    } else {
      console.log(
        `SKIPPED consume part (${codec}): the broker does not advertise ${missingGroupApis.join(', ')}; ` +
          'kafkajs consumes only through groups, so this part runs by itself once they are advertised'
      )
    }
  }

  await admin.deleteTopics({ topics, timeout: TIMEOUT_MS })
  const after = await admin.listTopics()
  topics.forEach(t => check(!after.includes(t), `${t} still listed after deleteTopics`))
  console.log('ok: deleteTopics')
  await admin.disconnect()
  console.log('PASS')
}

main().catch(e => {
  console.log(`FAIL: ${e && e.stack ? e.stack : e}`)
  process.exit(1)
})
