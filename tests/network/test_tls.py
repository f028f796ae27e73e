"""TLS listeners (network/tls.py) over asyncio's SSL transport and uvloop's (serve runs on uvloop):
the BufferedProtocol server connection with large frames, ssl.client.auth, the client
certificate's subject as the principal (ssl.principal.mapping.rules), and SASL_SSL."""
from __future__ import annotations

import asyncio
import ssl

import pytest
import uvloop
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from cluster_helpers import batch, produce_request
from minibroker.cluster import Cluster
from minibroker.network.client import KafkaClientConnection
from minibroker.network.tls import parse_mapping_rules, rfc2253
from minibroker.security.certs import client_certificate, tls_settings
from minibroker.security.principal import ANONYMOUS, KafkaPrincipal

pytestmark = pytest.mark.real_time


def client_context(d, cert: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(d / "ca.pem"))
    if cert:
        ctx.load_cert_chain(*client_certificate(d, "CN=alice,O=test"))
    return ctx


async def tls_connect(c, ctx) -> KafkaClientConnection:
    b = c.brokers[1]
    _, conn = await asyncio.wait_for(asyncio.get_running_loop().create_connection(
        lambda: KafkaClientConnection("tls-test"), b.host, b.port, ssl=ctx,
        server_hostname="localhost"), 10)
    return conn


async def large_frames_round_trip(d, client_auth: str) -> tuple:
    async with Cluster(brokers=1, listeners="SSL://127.0.0.1:0",
                       **tls_settings(d, client_auth)) as c:
        await c.create_topic("t", 1, 1)
        conn = await tls_connect(c, client_context(d, cert=True))
        for i in range(4):                      # ~600 KB frames: each gets a buffer of its own
            r = await conn.request(produce_request("t", 0, batch([bytes([i]) * 60_000] * 10, 0)),
                                   9)
            assert r.responses[0].partition_responses[0].error_code == 0
        (server,) = [s for s in c.brokers[1].connections if s.listener == "SSL"]
        end = c.brokers[1].replica_manager.get("t", 0).log.log_end_offset
        conn.close()
        return server.principal, end


@pytest.mark.parametrize("loop_factory", [asyncio.new_event_loop, uvloop.new_event_loop],
                         ids=["asyncio", "uvloop"])
def test_large_frames_over_tls_and_the_certificate_principal(tmp_path, loop_factory):
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        principal, end = runner.run(large_frames_round_trip(tmp_path, "required"))
    assert principal == KafkaPrincipal("User", "CN=alice,O=test")
    assert end == 40


async def test_client_auth_required_refuses_a_client_without_certificate(tmp_path):
    async with Cluster(brokers=1, listeners="SSL://127.0.0.1:0",
                       **tls_settings(tmp_path, "required")) as c:
        with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError)):
            conn = await tls_connect(c, client_context(tmp_path, cert=False))
            # TLS 1.3: the server's refusal arrives after the client's handshake completes.
            await conn.request(ApiVersionsRequest(), 0, timeout=5)


async def test_client_auth_requested_without_certificate_is_anonymous(tmp_path):
    async with Cluster(brokers=1, listeners="SSL://127.0.0.1:0",
                       **tls_settings(tmp_path, "requested")) as c:
        conn = await tls_connect(c, client_context(tmp_path, cert=False))
        assert (await conn.request(ApiVersionsRequest(), 0)).error_code == 0
        (server,) = [s for s in c.brokers[1].connections if s.listener == "SSL"]
        assert server.principal == ANONYMOUS
        conn.close()


async def test_mapping_rules_and_sasl_ssl(tmp_path):
    rules = r"RULE:^CN=([a-z]+),O=test$/$1/U,DEFAULT"
    async with Cluster(brokers=1, listeners="SSL://127.0.0.1:0", ssl_principal_mapping_rules=rules,
                       **tls_settings(tmp_path, "required")) as c:
        conn = await tls_connect(c, client_context(tmp_path, cert=True))
        await conn.request(ApiVersionsRequest(), 0)
        (server,) = [s for s in c.brokers[1].connections if s.listener == "SSL"]
        assert server.principal == KafkaPrincipal("User", "ALICE")
        conn.close()
    async with Cluster(brokers=1, listeners="SASL_SSL://127.0.0.1:0", users=("bob:pw",),
                       **tls_settings(tmp_path)) as c:
        conn = await tls_connect(c, client_context(tmp_path, cert=False))
        assert (await conn.request(SaslHandshakeRequest(mechanism="PLAIN"), 1)).error_code == 0
        r = await conn.request(SaslAuthenticateRequest(auth_bytes=b"\0bob\0pw"), 2)
        assert r.error_code == 0
        (server,) = [s for s in c.brokers[1].connections if s.listener == "SASL_SSL"]
        assert server.principal == KafkaPrincipal("User", "bob")
        conn.close()


def test_subject_formatting_and_rules():
    subject = ((("countryName", "US"),), (("organizationName", "a,b"),),
               (("commonName", "alice"),))
    assert rfc2253(subject) == r"CN=alice,O=a\,b,C=US"
    (rule, default) = parse_mapping_rules(r"RULE:^CN=(.*?),O=(.*)$/$1@$2/L, DEFAULT")
    assert rule.apply("CN=Alice,O=Test") == "alice@test"
    assert rule.apply("OU=x") is None and default.apply("OU=x") == "OU=x"
