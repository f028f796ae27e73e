"""controller/acls.py as pure operations: the exact records CreateAcls and DeleteAcls write, and
their replay into the image (Kafka's AclControlManagerTest)."""
from __future__ import annotations

import uuid

from kafka.errors import InvalidRequestError

from minibroker.controller import acls, records
from minibroker.controller.delta import MetadataDelta
from minibroker.controller.image import MetadataImage
from minibroker.ids import IdSource
from minibroker.protocol import records as R
from minibroker.security.acl import (AclBinding, AclBindingFilter, AclOperation as Op,
                                     AclPermissionType as Perm, PatternType as PT,
                                     ResourceType as RT)

READ_T = AclBinding(RT.TOPIC, "t", PT.LITERAL, "User:a", "*", Op.READ, Perm.ALLOW)
DENY_G = AclBinding(RT.GROUP, "g", PT.PREFIXED, "User:b", "*", Op.ALL, Perm.DENY)


def replay(image: MetadataImage, records) -> MetadataImage:
    delta = MetadataDelta(image)
    for i, r in enumerate(records):
        delta.replay(r, image.offset + 1 + i)
    return delta.apply()


def test_create_writes_one_record_per_new_acl():
    ids, same = IdSource(7), IdSource(7)
    first, second = same.uuid(), same.uuid()
    bad = AclBinding(RT.TOPIC, "t", PT.MATCH, "User:a", "*", Op.READ, Perm.ALLOW)
    res = acls.create_acls(MetadataImage(), [READ_T, bad, DENY_G, READ_T], ids)
    assert res.records == (records.acl_entry(first, READ_T), records.acl_entry(second, DENY_G))
    assert res.response == [(0, None), (InvalidRequestError.errno, "Invalid pattern type MATCH"),
                            (0, None), (0, None)]
    image = replay(MetadataImage(), res.records)
    assert dict(image.acls) == {first: READ_T, second: DENY_G}
    again = acls.create_acls(image, [READ_T], IdSource(8))     # exists: nothing written
    assert again.records == () and again.response == [(0, None)]


def test_delete_removes_each_match_once():
    a, b = uuid.UUID(int=1), uuid.UUID(int=2)
    image = replay(MetadataImage(), [records.acl_entry(a, READ_T), records.acl_entry(b, DENY_G)])
    by_a = AclBindingFilter(principal="User:a")
    everything = AclBindingFilter()
    unknown = AclBindingFilter(operation=Op.UNKNOWN)
    res = acls.delete_acls(image, [by_a, everything, unknown])
    assert res.records == (R.RemoveAccessControlEntryRecord(id=a),
                           R.RemoveAccessControlEntryRecord(id=b))
    assert res.response == [(0, None, [(READ_T, 0, None)]),
                            (0, None, [(READ_T, 0, None), (DENY_G, 0, None)]),
                            (InvalidRequestError.errno, "Filter contain UNKNOWN elements", [])]
    assert dict(replay(image, res.records).acls) == {}
