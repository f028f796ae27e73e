"""Who a request comes from: principals now; listeners, authentication and the authorizer next.

A low floor: network/ and broker/ import it, it imports nothing of the package's.
"""
