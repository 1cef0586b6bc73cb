#!/usr/bin/env node
// Log compaction seen by kafkajs 2.2.4: the same writes and the same expected answer as
// compaction.py (1,005 updates over 20 keys, 5 tombstoned, then one record after
// segment.ms), read from the topic's start until it holds what Apache Kafka serves: the
// latest record of each key at its own offset, then the last record.
//
// Usage: node compaction_kafkajs.js HOST:PORT
//
// Prints PASS and exits 0 on success; prints FAIL and what differed and exits 1 otherwise.

'use strict'

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'

const { Kafka, logLevel, CompressionTypes } = require('kafkajs')

const TOPIC = 'compaction-kafkajs'
const WRITES = 1005
const KEYS = 20
const TOMBSTONED = 5
const TIMEOUT_MS = 60000

function fail(message) {
  console.log(`FAIL: ${message}`)
  process.exit(1)
}

function writes() {
  const last = new Map()
  for (let i = 0; i < WRITES; i++) last.set(i % KEYS, i)
  const out = []
  for (let i = 0; i < WRITES; i++) {
    const key = i % KEYS
    const tombstone = key < TOMBSTONED && last.get(key) === i
    out.push({ key: `key-${key}`, value: tombstone ? null : `value-${i}` })
  }
  out.push({ key: 'last', value: 'written after segment.ms' })
  return out
}

function expected(all) {
  const latest = new Map()
  all.slice(0, -1).forEach((w, offset) => latest.set(w.key, offset))
  const kept = [...latest.values()].sort((a, b) => a - b).concat([all.length - 1])
  return kept.map(o => `${o}:${all[o].key}:${all[o].value}`)
}

async function readAll(kafka, round) {
  const consumer = kafka.consumer({ groupId: `compaction-kafkajs-${round}` })
  await consumer.connect()
  await consumer.subscribe({ topic: TOPIC, fromBeginning: true })
  const out = []
  let end = null
  const admin = kafka.admin()
  await admin.connect()
  end = Number((await admin.fetchTopicOffsets(TOPIC))[0].high)
  await admin.disconnect()
  let reachedEnd = false
  await consumer.run({
    eachMessage: async ({ message }) => {
      const value = message.value === null ? null : message.value.toString()
      out.push(`${message.offset}:${message.key.toString()}:${value}`)
      if (Number(message.offset) + 1 >= end) reachedEnd = true
    },
  })
  const deadline = Date.now() + TIMEOUT_MS
  while (!reachedEnd && Date.now() < deadline) await new Promise(r => setTimeout(r, 50))
  await consumer.disconnect()
  return out
}

async function main() {
  const kafka = new Kafka({ clientId: 'compaction-kafkajs', brokers: [process.argv[2]], logLevel: logLevel.NOTHING })
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({
    topics: [{
      topic: TOPIC, numPartitions: 1, replicationFactor: 1,
      configEntries: [
        { name: 'cleanup.policy', value: 'compact' },
        { name: 'segment.ms', value: '100' },
        { name: 'min.cleanable.dirty.ratio', value: '0.01' },
        { name: 'max.compaction.lag.ms', value: '100' },
      ],
    }],
  })
  await admin.disconnect()
  const producer = kafka.producer()
  await producer.connect()
  const all = writes()
  const perRound = Math.floor(WRITES / 10) + 1
  for (let start = 0; start < WRITES; start += perRound) {
    const messages = all.slice(start, Math.min(start + perRound, WRITES)).map(w => ({ ...w, partition: 0 }))
    await producer.send({ topic: TOPIC, acks: -1, compression: CompressionTypes.GZIP, messages })
    await new Promise(r => setTimeout(r, 150))
  }
  await producer.send({ topic: TOPIC, acks: -1, messages: [{ ...all[WRITES], partition: 0 }] })
  await producer.disconnect()
  const want = expected(all)
  const deadline = Date.now() + TIMEOUT_MS
  for (let round = 0; ; round++) {
    const got = await readAll(kafka, round)
    if (JSON.stringify(got) === JSON.stringify(want)) break
    if (Date.now() > deadline) {
      const i = want.findIndex((w, j) => got[j] !== w)
      fail(`read ${got.length} records, not Kafka's ${want.length}: at ${i} got ${got[i]}, want ${want[i]}`)
    }
    await new Promise(r => setTimeout(r, 200))
  }
  console.log(`PASS kafkajs: ${WRITES} writes over ${KEYS} keys compacted to the ${want.length - 1} latest (${TOMBSTONED} tombstones) plus the last record, offsets kept`)
  process.exit(0)
}

main().catch(e => fail(e.stack || String(e)))
