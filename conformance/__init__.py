"""Black-box conformance suite: real, unmodified Kafka clients against a served cluster."""
