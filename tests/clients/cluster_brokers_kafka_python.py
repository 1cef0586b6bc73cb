#!/usr/bin/env python3
"""kafka-python against a strom cluster: bootstraps from one broker and prints the ids
of the brokers the cluster metadata lists ("brokers 1,2,3").

Usage: cluster_brokers_kafka_python.py HOST:PORT
"""

import sys

from kafka.admin import KafkaAdminClient

admin = KafkaAdminClient(bootstrap_servers=sys.argv[1], request_timeout_ms=30000)
cluster = admin.describe_cluster()
ids = sorted(b["broker_id"] for b in cluster["brokers"])
print("brokers " + ",".join(str(i) for i in ids), "controller", cluster["controller_id"], flush=True)
admin.close()
