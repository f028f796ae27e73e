"""minibroker: a pure-Python asyncio Kafka wire-protocol broker cluster."""
