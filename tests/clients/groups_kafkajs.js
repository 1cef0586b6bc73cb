#!/usr/bin/env node
// kafkajs 2.2.4 consumer groups (non-flexible versions: JoinGroup <= 5, SyncGroup <= 3,
// Heartbeat <= 3, OffsetCommit <= 7, OffsetFetch <= 6, FindCoordinator <= 3) against a
// strom broker.
//
// Usage: node groups_kafkajs.js HOST:PORT
//
// Three consumers in one group over a six-partition topic must hold two partitions each
// (from their GROUP_JOIN events); when one disconnects, the other two must hold three
// each. Every record must be delivered, and the group's committed offsets (admin
// fetchOffsets) must reach the end of every partition.
//
// Prints PASS and exits 0 on success; prints FAIL and what differed and exits 1 otherwise.

'use strict'

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'

const { Kafka, logLevel } = require('kafkajs')

const TOPIC = 'groups-kafkajs'
const GROUP = 'groups-kafkajs'
const PARTITIONS = 6
const PER_PARTITION = 100
const TIMEOUT_MS = 90000

function fail(message) {
  console.log(`FAIL: ${message}`)
  process.exit(1)
}

async function waitFor(what, condition, state) {
  const deadline = Date.now() + TIMEOUT_MS
  while (!condition()) {
    if (Date.now() > deadline) fail(`timed out waiting for ${what}: ${state()}`)
    await new Promise(resolve => setTimeout(resolve, 50))
  }
}

async function produce(kafka, start) {
  const producer = kafka.producer()
  await producer.connect()
  const messages = []
  for (let i = start; i < start + PER_PARTITION; i++) {
    for (let p = 0; p < PARTITIONS; p++) messages.push({ partition: p, value: `p${p}-${i}` })
  }
  await producer.send({ topic: TOPIC, acks: -1, messages })
  await producer.disconnect()
}

// A member: its assignment (from GROUP_JOIN) and what it was delivered.
async function startMember(kafka, name, delivered) {
  const member = { name, owned: [], consumer: kafka.consumer({
    groupId: GROUP, sessionTimeout: 6000, heartbeatInterval: 500, rebalanceTimeout: 30000,
  }) }
  const { GROUP_JOIN } = member.consumer.events
  member.consumer.on(GROUP_JOIN, e => {
    member.owned = (e.payload.memberAssignment[TOPIC] || []).slice().sort()
  })
  await member.consumer.connect()
  await member.consumer.subscribe({ topic: TOPIC, fromBeginning: true })
  await member.consumer.run({
    eachMessage: async ({ partition, message }) => {
      delivered.add(`${partition}:${message.offset}`)
    },
  })
  return member
}

function balanced(members, each) {
  const all = new Set()
  for (const m of members) {
    if (m.owned.length !== each) return false
    m.owned.forEach(p => all.add(p))
  }
  return all.size === PARTITIONS
}

async function main() {
  const broker = process.argv[2]
  const kafka = new Kafka({ clientId: 'groups-kafkajs', brokers: [broker], logLevel: logLevel.NOTHING })
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic: TOPIC, numPartitions: PARTITIONS }], waitForLeaders: true })
  await produce(kafka, 0)

  const delivered = new Set()
  const members = []
  for (let i = 0; i < 3; i++) members.push(await startMember(kafka, `member-${i}`, delivered))
  const state = () => JSON.stringify(members.map(m => m.owned))
  await waitFor('three members to hold two partitions each', () => balanced(members, 2), state)

  await members[2].consumer.disconnect()
  const survivors = members.slice(0, 2)
  await waitFor('two members to hold three partitions each', () => balanced(survivors, 3), state)

  await produce(kafka, PER_PARTITION)
  await waitFor('every record to be delivered', () => {
    for (let p = 0; p < PARTITIONS; p++) {
      for (let o = 0; o < 2 * PER_PARTITION; o++) if (!delivered.has(`${p}:${o}`)) return false
    }
    return true
  }, () => `${delivered.size} delivered`)

  // kafkajs commits resolved offsets periodically and when it stops.
  for (const m of survivors) await m.consumer.disconnect()
  const offsets = await admin.fetchOffsets({ groupId: GROUP, topics: [TOPIC] })
  const committed = offsets[0].partitions.map(p => Number(p.offset)).sort()
  if (JSON.stringify(committed) !== JSON.stringify(Array(PARTITIONS).fill(2 * PER_PARTITION))) {
    fail(`committed offsets ${JSON.stringify(offsets)}`)
  }
  const groups = await admin.listGroups()
  if (!groups.groups.some(g => g.groupId === GROUP)) fail(`listGroups: ${JSON.stringify(groups)}`)
  const described = await admin.describeGroups([GROUP])
  if (described.groups[0].state !== 'Empty') fail(`describeGroups: ${JSON.stringify(described)}`)
  await admin.deleteGroups([GROUP])
  await admin.disconnect()
  console.log('PASS')
}

main().then(() => process.exit(0), e => fail(e.stack || e))
