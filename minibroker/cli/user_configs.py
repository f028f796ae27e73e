"""`minibroker configs --entity-type users`: SCRAM credentials as kafka-configs.sh manages them.

    --alter --entity-name alice --add-config 'SCRAM-SHA-256=[iterations=8192,password=secret]'
    --alter --entity-name alice --delete-config SCRAM-SHA-256
    --describe [--entity-name alice]
"""
from __future__ import annotations

import sys

from minibroker.client.admin import Admin
from minibroker.security.credentials import DEFAULT_ITERATIONS, SCRAM_MECHANISMS


def _upsertions(name: str, added: dict[str, str]) -> list[tuple]:
    out = []
    for mech, value in added.items():
        if mech.upper() not in SCRAM_MECHANISMS:
            sys.exit(f"Error: only SCRAM credentials can be set on users ({', '.join(SCRAM_MECHANISMS)}), "
                     f"not {mech}")
        fields = dict(kv.split("=", 1) for kv in value.split(",") if "=" in kv)
        if "password" not in fields:
            sys.exit(f"Error: {mech} needs password=..., e.g. {mech}=[iterations=8192,password=x]")
        try:
            iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
        except ValueError:
            sys.exit(f"Error: {mech}: iterations must be a number")
        out.append((name, mech.upper(), fields["password"], iterations))
    return out


async def alter_users(admin: Admin, args, added: dict[str, str]) -> None:
    if args.entity_name is None:
        sys.exit("Error: --alter needs --entity-name")
    deletions = [(args.entity_name, m.strip().upper()) for m in args.delete_config.split(",")
                 if m.strip()]
    upsertions = _upsertions(args.entity_name, added)
    if not deletions and not upsertions:
        sys.exit("Error: --alter needs --add-config or --delete-config")
    try:
        results = await admin.alter_user_scram_credentials(upsertions, deletions,
                                                           raise_on_error=False)
    except ValueError as e:
        sys.exit(f"Error: {e}")
    for e in results.values():
        if e is not None:
            sys.exit(f"Error while executing config command with args '--alter': "
                     f"{type(e).__name__}: {e}")
    print(f"Completed updating config for user {args.entity_name}.")


async def describe_users(admin: Admin, args) -> None:
    users = None if args.entity_name is None else [args.entity_name]
    for user, infos in (await admin.describe_user_scram_credentials(users)).items():
        if isinstance(infos, Exception):
            if args.entity_name is None:
                continue
            sys.exit(f"Error while executing config command with args '--describe': "
                     f"{type(infos).__name__}: {infos}")
        creds = ",".join(f"{mech}=iterations={n}" for mech, n in infos)
        print(f"SCRAM credential configs for user-principal '{user}' are {creds}")
