"""What a broker knows of the cluster: the metadata cache UpdateMetadata fills (cache.py).

Below the broker and the coordinators, which both read it (a coordinator listens to its topic
changes), so neither imports the other for it.
"""
