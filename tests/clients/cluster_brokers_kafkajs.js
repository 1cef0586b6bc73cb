#!/usr/bin/env node
// kafkajs against a strom cluster: bootstraps from one broker and prints the ids of the
// brokers the cluster metadata lists ("brokers 1,2,3").
//
// Usage: node cluster_brokers_kafkajs.js HOST:PORT

'use strict'

const { Kafka, logLevel } = require('kafkajs')

async function main () {
  const kafka = new Kafka({ clientId: 'strom-cluster-test', brokers: [process.argv[2]], logLevel: logLevel.NOTHING })
  const admin = kafka.admin()
  await admin.connect()
  const cluster = await admin.describeCluster()
  const ids = cluster.brokers.map(b => b.nodeId).sort((a, b) => a - b)
  console.log(`brokers ${ids.join(',')} controller ${cluster.controller}`)
  await admin.disconnect()
}

main().catch(e => { console.error(`FAIL: ${e.stack || e}`); process.exit(1) })
