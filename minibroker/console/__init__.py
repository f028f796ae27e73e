"""A web console for a Kafka cluster, with more where the broker is minibroker (the `console`
extra: starlette, uvicorn, jinja2).

    minibroker console --bootstrap-server 127.0.0.1:9092          # http://127.0.0.1:8080
    minibroker serve --console-port 8080                           # the cluster and its console

Pages: cluster, topics, messages, consumer groups (lag chart), partition changes (KIP-253 and
KIP-179), transactions. kafka_view.py and group_view.py read the cluster through the reference
client; app.py renders them; server.py runs uvicorn.
"""
