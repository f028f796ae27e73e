"""The connector against a SASL_SSL cluster, configured as Spark's Kafka connector is: the
`kafka.`-prefixed security properties. A batch write and read round trip with SCRAM-SHA-512 over
TLS, and a wrong password failing the job with the broker's authentication error (nothing
written)."""
from __future__ import annotations

import pytest

from minibroker.testing import security_config

pytestmark = pytest.mark.timeout(600)

JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="{}";'


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    from minibroker.testing.threaded import ThreadedCluster
    config = security_config("SASL_SSL", tls_dir=tmp_path_factory.mktemp("tls"),
                             users=["alice:alice-secret"])
    tc = ThreadedCluster(brokers=1, **config).start()
    yield tc, config["ssl_truststore_location"]
    tc.stop()


def _options(bootstrap: str, ca: str, password: str) -> dict:
    return {"kafka.bootstrap.servers": bootstrap, "kafka.security.protocol": "SASL_SSL",
            "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": ca,
            "kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.sasl.jaas.config": JAAS.format(password),
            "kafka.request.timeout.ms": "10000"}


def test_write_and_read_back_over_sasl_ssl(spark, secured):
    tc, ca = secured
    opts = _options(tc.bootstrap, ca, "alice-secret")
    df = spark.range(500, numPartitions=2).selectExpr("CAST(id AS STRING) AS value")
    df.write.format("minibroker").options(**opts).option("topic", "sec-spark").mode("append").save()
    got = spark.read.format("minibroker").options(**opts).option("subscribe", "sec-spark").load() \
        .selectExpr("CAST(value AS STRING) AS v").collect()
    assert sorted(int(r.v) for r in got) == list(range(500))


def test_a_wrong_password_fails_the_job_with_the_brokers_reason(spark, secured):
    tc, ca = secured
    df = spark.range(10, numPartitions=1).selectExpr("CAST(id AS STRING) AS value")
    with pytest.raises(Exception, match="Authentication failed|authentication"):
        df.write.format("minibroker").options(**_options(tc.bootstrap, ca, "wrong")) \
            .option("topic", "sec-spark-wrong").mode("append").save()
