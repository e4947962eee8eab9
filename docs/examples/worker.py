"""A sqlmq worker in Python (standard library only): long-poll, process, ack; nack on failure.

    SQLMQ_URL=http://127.0.0.1:8080 SQLMQ_QUEUE=emails SQLMQ_API_TOKEN=... python3 worker.py
"""
import json, os, urllib.request

URL, QUEUE = os.environ.get("SQLMQ_URL", "http://127.0.0.1:8080"), os.environ.get("SQLMQ_QUEUE", "jobs")
TOKEN, STOP_WHEN_IDLE = os.environ.get("SQLMQ_API_TOKEN"), os.environ.get("SQLMQ_STOP_WHEN_IDLE")

def call(action, body):
    req = urllib.request.Request(f"{URL}/v1/queues/{QUEUE}/{action}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    if TOKEN:
        req.add_header("Authorization", f"Bearer {TOKEN}")
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.load(resp)

def handle(body):  # your work here; raising an exception means "retry later"
    job = json.loads(body)
    if job.get("fail"):
        raise ValueError(f"cannot process {job}")
    print("processed", job, flush=True)

while True:
    got = call("receive", {"max": 10, "lease_ms": 30000, "wait_ms": 20000})["messages"]
    if not got and STOP_WHEN_IDLE:
        break
    for m in got:
        try:
            handle(m.get("body", ""))
            call("ack", {"receipts": [m["receipt"]]})
        except Exception as e:
            call("nack", {"receipts": [m["receipt"]], "error": str(e)})
