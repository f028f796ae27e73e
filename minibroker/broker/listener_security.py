"""What a listener's security protocol puts in front of dispatch: SASL authentication
(network/sasl.py) on SASL_PLAINTEXT and SASL_SSL, a TLS context (network/tls.py) on SSL and
SASL_SSL, and the client certificate's principal on SSL (on SASL_SSL the SASL identity wins, as
Kafka's DefaultKafkaPrincipalBuilder has it)."""
from __future__ import annotations

import ssl
from collections.abc import Callable
from typing import Any

from minibroker.network.sasl import SaslGate, SaslSettings
from minibroker.network.tcp import Handle
from minibroker.network.tls import PeerPrincipal, server_context
from minibroker.security.credentials import CredentialStore, scram_credential
from minibroker.security.listeners import Listener
from minibroker.security.principal import KafkaPrincipal
from minibroker.security.sasl import MECHANISMS


def enabled_mechanisms(config: Any) -> tuple[str, ...]:
    names = tuple(m.strip().upper() for m in config.sasl_enabled_mechanisms.split(",")
                  if m.strip())
    unknown = [m for m in names if m not in MECHANISMS]
    if unknown:
        raise ValueError(f"sasl.enabled.mechanisms: {unknown[0]} is not served (served: "
                         f"{', '.join(MECHANISMS)})")
    return names


def listener_security(spec: Listener, handle: Handle, config: Any,
                      credentials: CredentialStore, clock: Any
                      ) -> tuple[Handle, ssl.SSLContext | None,
                                 Callable[[Any], KafkaPrincipal] | None]:
    """(handle, ssl context or None, principal_of or None) for one listener."""
    ctx: ssl.SSLContext | None = None
    principal_of: Callable[[Any], KafkaPrincipal] | None = None
    if spec.tls:
        ctx = server_context(config)
        if not spec.sasl:
            principal_of = PeerPrincipal(config.ssl_principal_mapping_rules)
    if spec.sasl:
        handle = SaslGate(handle, SaslSettings(
            enabled_mechanisms(config), credentials, clock.now_ms,
            config.connections_max_reauth_ms, config.connection_failed_authentication_delay_ms))
    return handle, ctx, principal_of


# The brokers' one principal among themselves (serve --processes), as Kafka's brokers usually
# share one: the controller on the control plane and the followers on the inter-broker listener.
CONTROL_PLANE_USER = "minibroker-controller"
CLUSTER_MECHANISM = "SCRAM-SHA-512"


def cluster_only_gate(handle: Handle, config: Any, clock: Any) -> Handle:
    """`handle` behind SASL/SCRAM-SHA-512 that only the cluster user, with
    minibroker.control.plane.password, passes: no client's credentials are known there."""
    store = CredentialStore()
    store.set_scram(CONTROL_PLANE_USER, CLUSTER_MECHANISM,
                    scram_credential(CLUSTER_MECHANISM, config.minibroker_control_plane_password))
    delay_ms = config.connection_failed_authentication_delay_ms
    return SaslGate(handle, SaslSettings((CLUSTER_MECHANISM,), store, clock.now_ms,
                                         failed_delay_ms=delay_ms))


def control_plane_handle(handle: Handle, config: Any, clock: Any, network: Any) -> Handle:
    """The control-plane TCP listener's handle: with minibroker.control.plane.password set
    (serve --processes), only the controller, authenticated with SASL/SCRAM-SHA-512, gets a
    LeaderAndIsr, UpdateMetadata or StopReplica served; the in-memory path is unaffected."""
    password = config.minibroker_control_plane_password
    if not password:
        return handle
    network.control_plane_credentials = (CONTROL_PLANE_USER, password)
    return cluster_only_gate(handle, config, clock)


def cluster_listener(config: Any, inter_broker: Listener) -> str | None:
    """The inter-broker listener's name when only the cluster user may use it: a SASL_PLAINTEXT
    one with minibroker.control.plane.password set (serve --processes with a secured client
    listener, Kafka's inter.broker.listener.name with sasl.mechanism.inter.broker.protocol
    SCRAM-SHA-512); else None."""
    if config.minibroker_control_plane_password and \
            inter_broker.security_protocol == "SASL_PLAINTEXT":
        return inter_broker.name
    return None


def inter_broker_handle(handle: Handle, config: Any, clock: Any, network: Any) -> Handle:
    """The cluster listener's handle; this process's followers and transaction markers then
    authenticate as the cluster user (network/partitions.py), so every connection there did."""
    network.inter_broker_credentials = (CONTROL_PLANE_USER,
                                        config.minibroker_control_plane_password)
    return cluster_only_gate(handle, config, clock)
