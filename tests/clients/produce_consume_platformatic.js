#!/usr/bin/env node
// @platformatic/kafka 1.x (pure JS, Kafka 3.5-4.1 protocol: ApiVersions v3+ and flexible
// versions only) against a strom broker.
//
// Usage: node produce_consume_platformatic.js HOST:PORT
//
// 1. Admin: create one topic per codec with retention.ms set; listTopics shows them and
//    describeConfigs returns the config.
// 2. Producer (idempotent, acks=-1) sends N records per codec (none, gzip, snappy, lz4, and
//    zstd when this Node.js has zlib zstd); the acknowledged base offsets must be
//    contiguous from 0.
// 3. A consumer in a group (mode committed, falling back to earliest) reads every record
//    back (keys, values, offsets), commits the last of each topic and closes; the group's
//    committed offsets must be the end of each topic. A second consumer in the same group
//    resumes there: it gets only the records produced after the first closed.
// 4. Admin: deleteTopics removes the topics.
//
// Exits 0 and prints PASS on success; on failure prints what differed and exits 1.

'use strict'

const RECORDS = 1000
const BATCH = 100
const LATER = 10
const GROUP = 'platformatic-group'
const TIMEOUT_MS = 60000

function fail(message) {
  console.log(`FAIL: ${message}`)
  process.exit(1)
}

function check(condition, message) {
  if (!condition) fail(message)
}

const topicOf = codec => `platformatic-${codec}`
const valueOf = (codec, i) => `platformatic-${codec}-${String(i).padStart(5, '0')}-${'abcdefg'.repeat(i % 19)}`
const keyOf = i => `key-${i}`

function withTimeout(promise, what) {
  let timer
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out: ${what}`)), TIMEOUT_MS)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

async function produce(kafka, bootstrap, codec, indices) {
  const producer = new kafka.Producer({
    clientId: `platformatic-producer-${codec}`,
    bootstrapBrokers: [bootstrap],
    serializers: kafka.stringSerializers,
    idempotent: true,
    acks: kafka.ProduceAcks.ALL,
    compression: codec,
    autocreateTopics: false,
  })
  try {
    for (let start = 0; start < indices.length; start += BATCH) {
      const batch = indices.slice(start, start + BATCH)
      const result = await withTimeout(
        producer.send({
          messages: batch.map(i => ({ topic: topicOf(codec), partition: 0, key: keyOf(i), value: valueOf(codec, i) })),
        }),
        `${codec}: send`
      )
      const offsets = result.offsets ?? []
      check(
        offsets.length === 1 && offsets[0].topic === topicOf(codec) && offsets[0].partition === 0 &&
          BigInt(offsets[0].offset) === BigInt(batch[0]),
        `${codec}: batch from ${batch[0]} acknowledged at ${JSON.stringify(offsets, (_, v) => (typeof v === 'bigint' ? v.toString() : v))}`
      )
    }
  } finally {
    await producer.close()
  }
}

// Reads with a group consumer until `expected` (Map topic -> [offsets]) is in, commits the
// last record of each topic, closes, and returns Map topic -> [{offset, key, value}].
async function consumeGroup(kafka, bootstrap, topics, expected) {
  const consumer = new kafka.Consumer({
    groupId: GROUP,
    clientId: 'platformatic-consumer',
    bootstrapBrokers: [bootstrap],
    deserializers: kafka.stringDeserializers,
    sessionTimeout: 10000,
    heartbeatInterval: 500,
    maxWaitTime: 500,
  })
  const received = new Map(topics.map(t => [t, []]))
  const last = new Map()
  const done = () => [...expected].every(([t, offsets]) => received.get(t).length >= offsets.length)
  try {
    const stream = await withTimeout(
      consumer.consume({ topics, mode: 'committed', fallbackMode: 'earliest', autocommit: false }),
      'consume'
    )
    const reading = (async () => {
      for await (const message of stream) {
        check(received.has(message.topic), `record from unexpected topic ${message.topic}`)
        check(message.partition === 0, `record from ${message.topic}/${message.partition}`)
        received.get(message.topic).push({ offset: message.offset, key: message.key, value: message.value })
        last.set(message.topic, message)
        if (done()) break
      }
    })()
    await withTimeout(reading, `group consumer: got ${[...received].map(([t, r]) => `${t}=${r.length}`).join(' ')}`).catch(e => {
      fail(`${e.message}; got ${[...received].map(([t, r]) => `${t}=${r.length}`).join(' ')}`)
    })
    for (const message of last.values()) {
      await withTimeout(message.commit(), `commit ${message.topic}`)
    }
    await stream.close()
  } finally {
    await consumer.close(true)
  }
  return received
}

async function committedOffsets(kafka, bootstrap, topics) {
  const probe = new kafka.Consumer({ groupId: GROUP, clientId: 'platformatic-probe', bootstrapBrokers: [bootstrap] })
  try {
    return await withTimeout(
      probe.listCommittedOffsets({ topics: topics.map(topic => ({ topic, partitions: [0] })) }),
      'listCommittedOffsets'
    )
  } finally {
    await probe.close()
  }
}

function checkRecords(codec, received, indices) {
  const offsets = received.map(r => Number(r.offset))
  check(
    JSON.stringify(offsets) === JSON.stringify(indices),
    `${codec}: read offsets ${offsets.slice(0, 10)}... (${offsets.length}), expected ${indices.slice(0, 10)}... (${indices.length})`
  )
  for (const { offset, key, value } of received) {
    const i = Number(offset)
    check(key === keyOf(i), `${codec}: offset ${i} key ${key}`)
    check(value === valueOf(codec, i), `${codec}: offset ${i} value ${String(value).slice(0, 40)}`)
  }
}

async function main() {
  if (process.argv.length !== 3) fail('usage: node produce_consume_platformatic.js HOST:PORT')
  const bootstrap = process.argv[2]
  const kafka = await import('@platformatic/kafka')
  console.log(`@platformatic/kafka ${kafka.clientSoftwareVersion}, node ${process.version}`)

  const codecs = ['none', 'gzip', 'snappy', 'lz4']
  if (kafka.compressionsAlgorithms.zstd.available) {
    codecs.push('zstd')
  } else {
    console.log(`note: zstd needs zlib zstd, which node ${process.version} lacks`)
  }
  const topics = codecs.map(topicOf)

  const admin = new kafka.Admin({ clientId: 'platformatic-admin', bootstrapBrokers: [bootstrap] })
  try {
    const created = await withTimeout(
      admin.createTopics({
        topics,
        partitions: 1,
        replicas: 1,
        configs: [{ name: 'retention.ms', value: '3600000' }],
      }),
      'createTopics'
    )
    check(
      JSON.stringify(created.map(t => t.name).sort()) === JSON.stringify([...topics].sort()),
      `createTopics returned ${JSON.stringify(created)}`
    )
    const listed = await withTimeout(admin.listTopics(), 'listTopics')
    check(topics.every(t => listed.includes(t)), `listTopics ${listed} misses some of ${topics}`)
    console.log('ok: createTopics with retention.ms=3600000')

    const described = await withTimeout(
      admin.describeConfigs({
        resources: [
          { resourceType: kafka.ConfigResourceTypes.TOPIC, resourceName: topics[0], configurationKeys: ['retention.ms'] },
        ],
      }),
      'describeConfigs'
    )
    const entry = described[0]?.configs?.find(c => c.name === 'retention.ms')
    check(entry?.value === '3600000', `describeConfigs: ${JSON.stringify(described)}`)
    console.log('ok: describeConfigs returns retention.ms=3600000')

    const all = [...Array(RECORDS).keys()]
    for (const codec of codecs) {
      await produce(kafka, bootstrap, codec, all)
      console.log(`ok: ${codec}: ${RECORDS} records produced (acks=-1, idempotent)`)
    }

    let received = await consumeGroup(kafka, bootstrap, topics, new Map(topics.map(t => [t, all])))
    for (const codec of codecs) checkRecords(codec, received.get(topicOf(codec)), all)
    console.log(`ok: group ${GROUP} consumed every record of every codec and committed`)

    const committed = await committedOffsets(kafka, bootstrap, topics)
    for (const topic of topics) {
      const offsets = committed.get(topic)
      check(
        offsets && offsets.length === 1 && offsets[0] === BigInt(RECORDS),
        `committed offsets of ${topic}: ${offsets}, expected ${RECORDS}`
      )
    }
    console.log(`ok: committed offsets are ${RECORDS} for every topic`)

    const later = Array.from({ length: LATER }, (_, i) => RECORDS + i)
    for (const codec of codecs) await produce(kafka, bootstrap, codec, later)
    received = await consumeGroup(kafka, bootstrap, topics, new Map(topics.map(t => [t, later])))
    for (const codec of codecs) checkRecords(codec, received.get(topicOf(codec)), later)
    console.log(`ok: a second consumer of ${GROUP} resumed at the committed offsets`)

    await withTimeout(admin.deleteTopics({ topics }), 'deleteTopics')
    const deadline = Date.now() + TIMEOUT_MS
    for (;;) {
      const left = (await admin.listTopics()).filter(t => topics.includes(t))
      if (left.length === 0) break
      check(Date.now() < deadline, `still listed after deleteTopics: ${left}`)
      await new Promise(resolve => setTimeout(resolve, 100))
    }
    console.log('ok: deleteTopics removed the topics')
  } finally {
    await admin.close()
  }
  console.log('PASS')
}

main().catch(e => {
  console.log(`FAIL: ${e.stack || e}`)
  if (e.errors) console.log(require("util").inspect(e.errors, { depth: 8 }))
  process.exit(1)
})
