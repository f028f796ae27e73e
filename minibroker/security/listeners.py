"""Kafka's listener configs: `listeners`, `advertised.listeners`,
`listener.security.protocol.map`, `inter.broker.listener.name`.

`listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0`: several per broker, each a name (its
security protocol from the map, or the name itself when it is one) and an address. A fixed port
is broker 1's; broker i listens on port + i - 1 (port 0: each picks a free one).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# UpdateMetadata / RegisterBrokerRecord's security_protocol ids (Kafka's SecurityProtocol).
PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

_LISTENER = re.compile(r"^([A-Za-z][A-Za-z0-9_]*)://(\[[^\]]*\]|[^:]*):(\d+)$")


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    security_protocol: str
    host: str
    port: int

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def protocol_map(text: str) -> dict[str, str]:
    out = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        name, sep, proto = item.partition(":")
        if not sep or proto not in SECURITY_PROTOCOLS:
            raise ValueError(f"Invalid value {text} for configuration "
                             "listener.security.protocol.map: entries are NAME:PROTOCOL with "
                             f"PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)}")
        out[name.upper()] = proto
    return out


def parse_listeners(text: str, protocols: dict[str, str], config: str = "listeners"
                    ) -> list[Listener]:
    out: list[Listener] = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        m = _LISTENER.match(item)
        if m is None:
            raise ValueError(f"Invalid value {text} for configuration {config}: "
                             f"{item!r} is not NAME://host:port")
        name, host, port = m.group(1).upper(), m.group(2).strip("[]"), int(m.group(3))
        proto = protocols.get(name) or (name if name in SECURITY_PROTOCOLS else None)
        if proto is None:
            raise ValueError(f"No security protocol defined for listener {name}")
        if any(listener.name == name for listener in out):
            raise ValueError(f"Invalid value {text} for configuration {config}: "
                             f"each listener must have a different name, {name} repeats")
        if not 0 <= port <= 65535:
            raise ValueError(f"Invalid value {text} for configuration {config}: port {port}")
        out.append(Listener(name, proto, host, port))
    return out


def broker_listeners(config, broker_id: int) -> list[Listener]:
    """This broker's listeners (ports offset by broker id), in `listeners` order; the default is
    one PLAINTEXT listener on the cluster's host:port."""
    protocols = protocol_map(config.listener_security_protocol_map)
    specs = parse_listeners(config.listeners, protocols) or [
        Listener("PLAINTEXT", "PLAINTEXT", config.host, config.port)]
    return [Listener(s.name, s.security_protocol, s.host or config.host,
                     s.port + broker_id - 1 if s.port else 0) for s in specs]


def advertised(config, broker_id: int, bound: list[Listener]) -> list[Listener]:
    """What Metadata gives clients for each listener: advertised.listeners' entry for the name
    (its port offset like the listener's), else the bound address (0.0.0.0: the cluster host)."""
    protocols = protocol_map(config.listener_security_protocol_map)
    given = {a.name: a for a in parse_listeners(config.advertised_listeners, protocols,
                                                "advertised.listeners")}
    out = []
    for b in bound:
        a = given.get(b.name)
        if a is not None:
            out.append(Listener(b.name, b.security_protocol, a.host,
                                a.port + broker_id - 1 if a.port else b.port))
        else:
            host = b.host if b.host not in ("", "0.0.0.0", "::") else config.host
            out.append(Listener(b.name, b.security_protocol, host, b.port))
    return out


def primary(config, listeners: list[Listener]) -> Listener:
    """The inter-broker listener (inter.broker.listener.name, else the first): its address is
    the broker's registered one, where other brokers replicate from."""
    name = config.inter_broker_listener_name.upper()
    for listener in listeners:
        if listener.name == name:
            return listener
    if name:
        raise ValueError(f"inter.broker.listener.name must be a listener name defined in "
                         f"listeners; {name} is not")
    return listeners[0]
