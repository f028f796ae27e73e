"""Real clients authenticate against minibroker with their own security settings (docs/security.md):
kafka-python, aiokafka, confluent-kafka (librdkafka) and kafkajs with PLAIN, SCRAM-SHA-256 and
SCRAM-SHA-512 over SASL_PLAINTEXT and SASL_SSL; OAUTHBEARER (unsecured JWS) with librdkafka and
kafka-python; SSL with and without a client certificate; kcat over SASL_SSL; a wrong password
fails with each client's authentication error.

One `serve` process with three listeners (SASL_PLAINTEXT, SASL_SSL, SSL with
ssl.client.auth=requested) is shared by every test: each listener's addresses come from serve's
LISTENER lines, and Metadata answers each client with the endpoints of its own listener.
"""
from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

from conformance.drivers import kafkajs
from conformance.drivers.kcat import binary as kcat_binary

USER, PASSWORD = "alice", "alice-secret"
SCRAM = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
CLIENTS = ("kafka_python", "aiokafka", "confluent", "kafkajs")


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    """{"ca": path, "tls": dir, "SASL_PLAINTEXT": bootstrap, "SASL_SSL": ..., "SSL": ...}."""
    tls = tmp_path_factory.mktemp("tls")
    cmd = [sys.executable, "-m", "minibroker", "serve", "--brokers", "1", "--port", "0",
           "--tls-dir", str(tls), "--user", f"{USER}:{PASSWORD}",
           "--override", "listeners=SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,"
                         "SSL://127.0.0.1:0",
           "--override", "ssl.client.auth=requested",
           "--override", "group.initial.rebalance.delay.ms=0"]
    log = open(tmp_path_factory.mktemp("log") / "serve.log", "wb")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()
    out = {"tls": tls}
    try:
        deadline = time.monotonic() + 30
        while not all(k in out for k in ("SASL_PLAINTEXT", "SASL_SSL", "SSL", "ca")):
            word, _, rest = lines.get(timeout=max(0.1, deadline - time.monotonic())
                                      ).decode().strip().partition(" ")
            if word == "CA":
                out["ca"] = rest
            elif word == "LISTENER":
                name, bootstrap = rest.split()
                out[name] = bootstrap
        yield out
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(15)
        log.close()


def _topic(hint: str) -> str:
    return f"sec-{hint}-{os.getpid()}-{time.monotonic_ns() % 10**9}".replace("_", "-").lower()


def _jwt(sub: str) -> str:
    def part(d):
        return base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()
    now = time.time()
    return f"{part({'alg': 'none'})}.{part({'sub': sub, 'iat': now, 'exp': now + 3600})}."


# ---------------------------------------------------------------------- each client's settings
def kafka_python_settings(protocol, mechanism, password, ca, cert=None) -> dict:
    s = dict(security_protocol=protocol)
    if protocol.startswith("SASL"):
        s.update(sasl_mechanism=mechanism)
        if mechanism == "OAUTHBEARER":
            from kafka.net.sasl.oauth import AbstractTokenProvider

            class Unsecured(AbstractTokenProvider):
                def token(self):
                    return _jwt(USER)
            s.update(sasl_oauth_token_provider=Unsecured())
        else:
            s.update(sasl_plain_username=USER, sasl_plain_password=password)
    if protocol.endswith("SSL"):
        s.update(ssl_cafile=ca)
        if cert:
            s.update(ssl_certfile=cert[0], ssl_keyfile=cert[1])
    return s


def librdkafka_settings(protocol, mechanism, password, ca, cert=None) -> dict:
    s = {"security.protocol": protocol}
    if protocol.startswith("SASL"):
        s["sasl.mechanism"] = mechanism
        if mechanism == "OAUTHBEARER":
            s.update({"enable.sasl.oauthbearer.unsecure.jwt": True,
                      "sasl.oauthbearer.config": f"principal={USER}"})
        else:
            s.update({"sasl.username": USER, "sasl.password": password})
    if protocol.endswith("SSL"):
        s["ssl.ca.location"] = ca
        if cert:
            s.update({"ssl.certificate.location": str(cert[0]), "ssl.key.location": str(cert[1])})
    return s


def produce_kafka_python(bootstrap, settings) -> None:
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bootstrap, bootstrap_timeout_ms=8000, **settings)
    try:
        p.send(_topic("kp"), b"authenticated").get(20)
    finally:
        p.close()


def produce_aiokafka(bootstrap, protocol, mechanism, password, ca, cert=None) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    async def run():
        kw = dict(security_protocol=protocol)
        if protocol.startswith("SASL"):
            kw.update(sasl_mechanism=mechanism, sasl_plain_username=USER,
                      sasl_plain_password=password)
        if protocol.endswith("SSL"):
            kw["ssl_context"] = create_ssl_context(
                cafile=ca, certfile=cert and str(cert[0]), keyfile=cert and str(cert[1]))
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=10000, **kw)
        await p.start()
        try:
            await p.send_and_wait(_topic("aio"), b"authenticated")
        finally:
            await p.stop()
    asyncio.run(run())


def produce_confluent(bootstrap, settings) -> list:
    """Returns the error_cb errors; raises if the record was not delivered."""
    from confluent_kafka import Producer
    errors, delivered = [], []
    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000,
                  "error_cb": lambda e: errors.append(f"{e.name()}: {e.str()}"), **settings})
    p.produce(_topic("rd"), b"authenticated", on_delivery=lambda err, msg: delivered.append(
        None if err is None else f"{err.name()}: {err.str()}"))
    p.flush(15)
    if delivered != [None]:
        raise RuntimeError("not delivered: " + "; ".join(map(str, delivered + errors)))
    return errors


def produce_kafkajs(bootstrap, protocol, mechanism, password, ca, cert=None) -> None:
    extra = {}
    if protocol.startswith("SASL"):
        extra["sasl"] = {"mechanism": mechanism.lower(), "username": USER, "password": password}
    if protocol.endswith("SSL"):
        extra["ssl"] = {"ca": ca, **({"cert": str(cert[0]), "key": str(cert[1])} if cert else {})}
    topic = _topic("js")        # kafkajs' produce reads the topic's metadata: create it first
    kafkajs._call("create_topic", bootstrap, 30, topic=topic, partitions=1, rf=1, configs={},
                  **extra)
    kafkajs._call("produce", bootstrap, 30, topic=topic, codec="none", acks="all",
                  records=[[None, base64.b64encode(b"authenticated").decode()]], **extra)


def produce(client, bootstrap, protocol, mechanism, password, ca, cert=None):
    if client == "kafka_python":
        return produce_kafka_python(bootstrap, kafka_python_settings(
            protocol, mechanism, password, ca, cert))
    if client == "confluent":
        return produce_confluent(bootstrap, librdkafka_settings(
            protocol, mechanism, password, ca, cert))
    if client == "aiokafka":
        return produce_aiokafka(bootstrap, protocol, mechanism, password, ca, cert)
    return produce_kafkajs(bootstrap, protocol, mechanism, password, ca, cert)


# ---------------------------------------------------------------------- the matrix
@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", SCRAM)
@pytest.mark.parametrize("client", CLIENTS)
def test_sasl_authentication(secure, client, mechanism, protocol):
    produce(client, secure[protocol], protocol, mechanism, PASSWORD, secure["ca"])


@pytest.mark.parametrize("client", ["kafka_python", "confluent"])
def test_oauthbearer_unsecured_jws(secure, client):
    produce(client, secure["SASL_PLAINTEXT"], "SASL_PLAINTEXT", "OAUTHBEARER", None, secure["ca"])


@pytest.mark.parametrize("with_cert", [False, True], ids=["no-cert", "client-cert"])
@pytest.mark.parametrize("client", CLIENTS)
def test_ssl(secure, client, with_cert):
    from minibroker.security.certs import client_certificate
    cert = client_certificate(secure["tls"], "CN=alice,O=test", f"c-{client}") \
        if with_cert else None
    produce(client, secure["SSL"], "SSL", None, None, secure["ca"], cert)


@pytest.mark.clients("kcat")
def test_kcat_over_sasl_ssl(secure):
    topic = _topic("kcat")
    args = [kcat_binary(), "-b", secure["SASL_SSL"], "-X", "security.protocol=SASL_SSL",
            "-X", f"ssl.ca.location={secure['ca']}", "-X", "sasl.mechanisms=SCRAM-SHA-256",
            "-X", f"sasl.username={USER}"]
    out = subprocess.run(args + ["-X", f"sasl.password={PASSWORD}", "-P", "-t", topic],
                         input=b"via kcat\n", capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode()
    out = subprocess.run(args + ["-X", f"sasl.password={PASSWORD}", "-C", "-t", topic, "-o",
                                 "beginning", "-c", "1", "-e"], capture_output=True, timeout=60)
    assert out.stdout == b"via kcat\n", out.stderr
    out = subprocess.run(args + ["-X", "sasl.password=wrong", "-L", "-m", "5"],
                         capture_output=True, timeout=60)
    assert out.returncode != 0
    assert b"Authentication failed" in out.stderr, out.stderr


# ---------------------------------------------------------------------- wrong password
def test_wrong_password_kafka_python(secure, caplog):
    from kafka.errors import KafkaError
    caplog.set_level(logging.INFO, "kafka")
    with pytest.raises(KafkaError):
        produce("kafka_python", secure["SASL_SSL"], "SASL_SSL", "PLAIN", "wrong", secure["ca"])
    assert "SaslAuthenticationFailedError: Authentication failed: Invalid username or " \
           "password" in caplog.text


def test_wrong_password_librdkafka(secure):
    with pytest.raises(RuntimeError) as raised:     # the record is never delivered
        produce("confluent", secure["SASL_SSL"], "SASL_SSL", "SCRAM-SHA-512", "wrong",
                secure["ca"])
    assert "_AUTHENTICATION" in str(raised.value), raised.value
    assert "SASL authentication error: Authentication failed during authentication due to " \
           "invalid credentials with SASL mechanism SCRAM-SHA-512" in str(raised.value)


def test_wrong_password_aiokafka(secure, caplog):
    from aiokafka.errors import KafkaError
    with pytest.raises(KafkaError):         # it cannot bootstrap, and logs the broker's error
        produce("aiokafka", secure["SASL_PLAINTEXT"], "SASL_PLAINTEXT", "SCRAM-SHA-256", "wrong",
                secure["ca"])
    assert "[Error 58] SaslAuthenticationFailed: Authentication failed during authentication " \
           "due to invalid credentials with SASL mechanism SCRAM-SHA-256" in caplog.text


def test_wrong_password_kafkajs(secure):
    from conformance.drivers import DriverError
    with pytest.raises(DriverError, match="SASL SCRAM SHA256 authentication failed"):
        produce("kafkajs", secure["SASL_PLAINTEXT"], "SASL_PLAINTEXT", "SCRAM-SHA-256", "wrong",
                secure["ca"])
