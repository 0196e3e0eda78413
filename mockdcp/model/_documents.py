"""What a data node does with the KV document commands, over the bucket model (pure).

Every write goes through the bucket (``Bucket.set`` / ``delete`` / ``touch`` /
``expire``), so it gets the next seqno of its vbucket and every open stream sees it.
Sources: kv_engine ``docs/BinaryProtocol.md`` (Set/Add/Replace, Delete, Touch, GetMeta)
and ``docs/SubDocument.md`` (multi-path commands, document flags, xattrs):

* CAS: a non-zero CAS must equal the document's (KEY_EEXISTS otherwise); a CAS on a
  missing document is KEY_ENOENT; ADD of a live document is KEY_EEXISTS, REPLACE or
  DELETE of a missing one KEY_ENOENT. A tombstone is a missing document.
* Expiry: 0 is none, up to 30 days is relative to now, anything larger is an absolute
  Unix time. A document read after its expiry is expired then (an EXPIRATION, as the
  node's expiry-on-access does) and is missing.
* Xattrs live in the value (the XATTR datatype bit, an xattr section before the body).
  A full-document store keeps the system xattrs (keys starting with ``_``) and drops the
  user ones; GET returns the body only.
* Multi-path mutations apply all specs or none: the first failing spec's index and
  status come back as SUBDOC_MULTI_PATH_FAILURE. Xattr specs come before body specs
  (SUBDOC_INVALID_XATTR_ORDER). MKDOC creates a missing document, ADD requires it to be
  missing (both: EINVAL); ACCESS_DELETED lets a lookup read a tombstone.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import attrs
import cramjam

from mockdcp.model._subdoc import SubdocError, dumps, lookup, mutate, parse_path
from mockdcp.protocol import (
    Datatype,
    DocFlag,
    PathFlag,
    RemoteProtocolError,
    Status,
    SubdocOpcode,
    VBucketState,
    encode_mutation_failure,
    encode_xattrs,
    split_xattrs,
)
from mockdcp.util import MockDcpError, ModelError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mockdcp.model._bucket import Bucket
    from mockdcp.model._item import Item
    from mockdcp.model._vbucket import VBucket
    from mockdcp.protocol import SubdocSpec

#: BinaryProtocol.md: expiries up to 30 days are relative, larger ones absolute.
RELATIVE_EXPIRY_LIMIT = 30 * 24 * 3600


class KvError(MockDcpError):
    """A document command failed with ``status`` (``value``: the response body)."""

    def __init__(self, status: Status, context: str = "", *, value: bytes = b"") -> None:
        super().__init__(context or status.name)
        self.status = status
        self.context = context
        self.value = value


@attrs.frozen
class Written:
    """A write's result: the new item (its CAS and seqno) and the vbucket's uuid."""

    item: Item
    vbucket_uuid: int
    #: multi-mutation: (spec index, value) for the specs that return one (COUNTER)
    results: list[tuple[int, bytes]] = attrs.field(factory=list)


@attrs.frozen
class Looked:
    """A multi-lookup's result: the overall status and (status, value) per spec."""

    status: Status
    item: Item
    results: list[tuple[int, bytes]]


@attrs.frozen
class Body:
    """A stored value split into its xattrs and its body."""

    xattrs: dict[str, Any]
    body: bytes
    json: bool

    @classmethod
    def of(cls, item: Item | None) -> Body:
        if item is None:
            return cls({}, b"", False)
        value, datatype = item.value, item.datatype
        xattrs: dict[str, Any] = {}
        if datatype & Datatype.XATTR:
            xattrs, value = _split(value)
        return cls(xattrs, value, bool(datatype & Datatype.JSON))


def _split(value: bytes) -> tuple[dict[str, Any], bytes]:
    """An XATTR value's xattrs (name -> parsed JSON) and body; ``KvError`` EINVAL when
    the section is malformed or an xattr is not JSON (binary xattrs are not modelled)."""
    try:
        pairs, body = split_xattrs(value)
        return {k.decode(): json.loads(v) for k, v in pairs}, body
    except (RemoteProtocolError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise KvError(Status.EINVAL, f"xattrs: {exc}") from None


def _is_json(body: bytes) -> bool:
    try:
        json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return False
    return True


def _encode(xattrs: dict[str, Any], body: bytes) -> tuple[bytes, int]:
    """The stored value and datatype of ``body`` with ``xattrs``."""
    datatype = Datatype.JSON if _is_json(body) else Datatype.RAW
    if not xattrs:
        return body, int(datatype)
    pairs = [(k, dumps(v)) for k, v in xattrs.items()]
    return encode_xattrs(pairs, body), int(datatype | Datatype.XATTR)


class Documents:
    """The document commands of one bucket (see the module docstring)."""

    def __init__(self, bucket: Bucket) -> None:
        self.bucket = bucket

    # -- lookups -------------------------------------------------------------------------

    def _vbucket(self, vbid: int) -> VBucket:
        if not 0 <= vbid < self.bucket.num_vbuckets:
            raise KvError(Status.NOT_MY_VBUCKET)
        vb = self.bucket.vbuckets[vbid]
        if vb.state is not VBucketState.ACTIVE:
            raise KvError(Status.NOT_MY_VBUCKET)
        return vb

    def _check_collection(self, cid: int) -> None:
        """UNKNOWN_COLLECTION unless the bucket's manifest has ``cid`` (live)."""
        try:
            self.bucket.manifest.check_collection(cid)
        except ModelError as exc:
            raise KvError(Status.UNKNOWN_COLLECTION, str(exc)) from None

    def _item(self, vbid: int, cid: int, key: bytes, *, deleted: bool = False) -> Item | None:
        """The document (a tombstone only with ``deleted``), expiring it if it is due."""
        self._check_collection(cid)
        vb = self._vbucket(vbid)
        item = vb.get(key, cid)
        due = item is not None and not item.deleted and 0 < item.expiry <= self.bucket.clock()
        if due:  # expiry on access: an EXPIRATION at the next seqno
            item = self.bucket.expire(key, collection_id=cid, vbucket=vbid)
        if item is None or (item.deleted and not deleted):
            return None
        return item

    def _live(self, vbid: int, cid: int, key: bytes) -> Item:
        item = self._item(vbid, cid, key)
        if item is None:
            raise KvError(Status.KEY_ENOENT, "no such document")
        return item

    def get(self, vbid: int, cid: int, key: bytes) -> tuple[Item, bytes, int]:
        """GET: the live document, its body (xattrs left out) and that body's datatype."""
        item = self._live(vbid, cid, key)
        doc = Body.of(item)
        return item, doc.body, int(Datatype.JSON if doc.json else Datatype.RAW)

    def get_meta(self, vbid: int, cid: int, key: bytes) -> Item:
        """GET_META: the document or its tombstone (KEY_ENOENT when neither)."""
        item = self._item(vbid, cid, key, deleted=True)
        if item is None:
            raise KvError(Status.KEY_ENOENT, "no such document")
        return item

    def vbucket_uuid(self, vbid: int) -> int:
        return self.bucket.vbuckets[vbid].failover.newest_uuid

    # -- whole-document writes ------------------------------------------------------------

    def _absolute(self, expiry: int) -> int:
        if 0 < expiry <= RELATIVE_EXPIRY_LIMIT:
            return int(self.bucket.clock()) + expiry
        return expiry

    def _check_cas(self, item: Item | None, cas: int) -> None:
        if cas and item is None:
            raise KvError(Status.KEY_ENOENT, "CAS given for a missing document")
        if cas and item is not None and item.cas != cas:
            raise KvError(Status.KEY_EEXISTS, "CAS mismatch")

    def store(
        self,
        mode: str,
        vbid: int,
        cid: int,
        key: bytes,
        value: bytes,
        *,
        datatype: int = 0,
        flags: int = 0,
        expiry: int = 0,
        cas: int = 0,
        preserve_ttl: bool = False,
        durability: int = 0,
    ) -> Written:
        """SET, ADD or REPLACE (``mode``); with a ``durability`` level (the frame info
        SDKs send) a prepare the node commits at once (a prepare and a commit, each at
        its own seqno)."""
        self._check_no_prepare(vbid, cid, key)
        old = self._item(vbid, cid, key)
        if mode == "add":
            if cas:
                raise KvError(Status.EINVAL, "ADD takes no CAS")
            if old is not None:
                raise KvError(Status.KEY_EEXISTS, "document exists")
        elif mode == "replace" and old is None:
            raise KvError(Status.KEY_ENOENT, "no such document")
        self._check_cas(old, cas)
        if datatype & Datatype.SNAPPY:
            try:
                value = bytes(cramjam.snappy.decompress_raw(value))
            except cramjam.DecompressionError:
                raise KvError(Status.EINVAL, "value is not valid snappy") from None
        if datatype & Datatype.XATTR:
            xattrs, body = _split(value)
        else:
            body = value
            kept = Body.of(old).xattrs
            xattrs = {k: v for k, v in kept.items() if k.startswith("_")}
        stored, dt = _encode(xattrs, body)
        expiry = old.expiry if preserve_ttl and old is not None else self._absolute(expiry)
        if durability:
            item: Item = self.bucket.sync_write(
                key,
                stored,
                collection_id=cid,
                level=durability,
                flags=flags,
                expiry=expiry,
                datatype=dt,
                vbucket=vbid,
            )
        else:
            item = self.bucket.set(
                key,
                stored,
                collection_id=cid,
                flags=flags,
                expiry=expiry,
                datatype=dt,
                vbucket=vbid,
            )
        return Written(item, self.vbucket_uuid(vbid))

    def _check_no_prepare(self, vbid: int, cid: int, key: bytes) -> None:
        """SYNC_WRITE_IN_PROGRESS while the document's prepare is pending, checked before
        the document itself (kv_engine ``VBucket::deleteItem``, ``fetchValueForWrite``:
        a key with only a pending prepare is in progress, not missing)."""
        if (cid, key) in self._vbucket(vbid).pending:
            raise KvError(Status.SYNC_WRITE_IN_PROGRESS, "a durable write is in progress")

    def delete(
        self, vbid: int, cid: int, key: bytes, *, cas: int = 0, durability: int = 0
    ) -> Written:
        """DELETE: a tombstone at the next seqno (with ``durability``: a prepared
        deletion committed at once)."""
        self._check_no_prepare(vbid, cid, key)
        old = self._live(vbid, cid, key)
        self._check_cas(old, cas)
        item: Item
        if durability:
            item = self.bucket.sync_write(
                key, collection_id=cid, level=durability, deleted=True, vbucket=vbid
            )
        else:
            item = self.bucket.delete(key, collection_id=cid, vbucket=vbid)
        return Written(item, self.vbucket_uuid(vbid))

    def touch(self, vbid: int, cid: int, key: bytes, expiry: int) -> Written:
        """TOUCH / GAT: a new expiry (a mutation with the same value)."""
        self._check_no_prepare(vbid, cid, key)
        self._live(vbid, cid, key)
        item = self.bucket.touch(key, self._absolute(expiry), collection_id=cid, vbucket=vbid)
        return Written(item, self.vbucket_uuid(vbid))

    # -- sub-document ------------------------------------------------------------------

    def lookup_in(
        self, vbid: int, cid: int, key: bytes, specs: Sequence[SubdocSpec], doc_flags: int = 0
    ) -> Looked:
        """SUBDOC_MULTI_LOOKUP: every spec's result; KEY_ENOENT for a missing document."""
        access_deleted = bool(doc_flags & DocFlag.ACCESS_DELETED)
        item = self._item(vbid, cid, key, deleted=access_deleted)
        if item is None:
            raise KvError(Status.KEY_ENOENT, "no such document")
        doc = Body.of(item)
        parsed: list[Any] = []  # the body, parsed once when a path needs it
        results = [self._lookup_one(item, doc, spec, parsed, vbid) for spec in specs]
        failed = any(status != Status.SUCCESS for status, _ in results)
        if item.deleted:
            status = (
                Status.SUBDOC_MULTI_PATH_FAILURE_DELETED
                if failed
                else Status.SUBDOC_SUCCESS_DELETED
            )
        else:
            status = Status.SUBDOC_MULTI_PATH_FAILURE if failed else Status.SUCCESS
        return Looked(status, item, results)

    def _lookup_one(
        self, item: Item, doc: Body, spec: SubdocSpec, parsed: list[Any], vbid: int
    ) -> tuple[int, bytes]:
        try:
            path = spec.path.decode()
            if spec.opcode == SubdocOpcode.GET_DOC:
                if spec.path or spec.xattr:
                    raise SubdocError(Status.SUBDOC_INVALID_COMBO, "GET_DOC takes no path")
                return Status.SUCCESS, doc.body
            if spec.xattr:
                return Status.SUCCESS, lookup(
                    self._xattr_view(item, doc, path, vbid), spec.opcode, path
                )
            return Status.SUCCESS, lookup(self._parsed(doc, parsed), spec.opcode, path)
        except SubdocError as exc:
            return exc.status, b""
        except UnicodeDecodeError:
            return Status.SUBDOC_PATH_EINVAL, b""

    def _parsed(self, doc: Body, parsed: list[Any]) -> object:
        if not parsed:
            try:
                parsed.append(json.loads(doc.body))
            except (ValueError, UnicodeDecodeError):
                raise SubdocError(Status.SUBDOC_DOC_NOT_JSON) from None
        return parsed[0]

    def _xattr_view(self, item: Item, doc: Body, path: str, vbid: int) -> dict[str, Any]:
        """The xattrs as one object keyed by xattr name, with the virtual ones the path
        names (``$document``, ``$XTOC``)."""
        comps = parse_path(path)
        name = comps[0] if comps else ""
        if not isinstance(name, str) or not name:
            raise SubdocError(Status.SUBDOC_PATH_EINVAL, "an xattr path starts with a name")
        if not name.startswith("$"):
            return doc.xattrs
        if name == "$document":
            return {name: self._document_vattr(item, doc, vbid)}
        if name == "$XTOC":
            return {name: list(doc.xattrs)}
        raise SubdocError(Status.SUBDOC_XATTR_UNKNOWN_VATTR)

    def _document_vattr(self, item: Item, doc: Body, vbid: int) -> dict[str, Any]:
        """``$document`` (docs/SubDocument.md "Virtual extended attributes")."""
        return {
            "CAS": f"0x{item.cas:016x}",
            "vbucket_uuid": f"0x{self.vbucket_uuid(vbid):016x}",
            "seqno": f"0x{item.seqno:016x}",
            "revid": str(item.rev_seqno),
            "exptime": item.expiry,
            "flags": item.flags,
            "value_bytes": len(doc.body),
            "datatype": ["json"] if doc.json else ["raw"],
            "deleted": item.deleted,
            "last_modified": str(item.cas // 1_000_000_000),
        }

    def mutate_in(
        self,
        vbid: int,
        cid: int,
        key: bytes,
        specs: Sequence[SubdocSpec],
        *,
        doc_flags: int = 0,
        expiry: int = 0,
        user_flags: int | None = None,
        cas: int = 0,
        preserve_ttl: bool = False,
    ) -> Written:
        """SUBDOC_MULTI_MUTATION: all specs or none (see the module docstring)."""
        flags = DocFlag(doc_flags)
        if flags & DocFlag.MKDOC and flags & DocFlag.ADD:
            raise KvError(Status.EINVAL, "MKDOC and ADD are exclusive")
        if flags & (DocFlag.CREATE_AS_DELETED | DocFlag.REVIVE_DOCUMENT):
            raise KvError(Status.NOT_SUPPORTED, "create-as-deleted and revive are not modelled")
        _check_xattr_order(specs)
        self._check_no_prepare(vbid, cid, key)
        old = self._item(vbid, cid, key)
        if old is None and not flags & (DocFlag.MKDOC | DocFlag.ADD):
            raise KvError(Status.KEY_ENOENT, "no such document")
        if old is not None and flags & DocFlag.ADD:
            raise KvError(Status.KEY_EEXISTS, "document exists")
        self._check_cas(old, cas)
        doc = Body.of(old)
        xattrs = json.loads(json.dumps(doc.xattrs))  # a deep copy: all specs or none
        body, results, delete = self._apply(specs, xattrs, doc.body, old is None)
        if delete:
            return self.delete(vbid, cid, key, cas=cas)
        stored, datatype = _encode(xattrs, body)
        expiry = old.expiry if preserve_ttl and old is not None else self._absolute(expiry)
        if user_flags is None:
            user_flags = old.flags if old is not None else 0
        item = self.bucket.set(
            key,
            stored,
            collection_id=cid,
            flags=user_flags,
            expiry=expiry,
            datatype=datatype,
            vbucket=vbid,
        )
        return Written(item, self.vbucket_uuid(vbid), results)

    def _apply(
        self, specs: Sequence[SubdocSpec], xattrs: dict[str, Any], body: bytes, new: bool
    ) -> tuple[bytes, list[tuple[int, bytes]], bool]:
        """Apply every spec to copies: (new body, COUNTER results, delete the doc?).
        Raises ``KvError`` SUBDOC_MULTI_PATH_FAILURE naming the first failing spec."""
        tree: list[Any] = []  # the parsed body once a path spec needs it
        results: list[tuple[int, bytes]] = []
        delete = False
        for i, spec in enumerate(specs):
            try:
                path = spec.path.decode()
                mkdir = bool(spec.flags & PathFlag.MKDIR_P)
                if spec.opcode in (SubdocOpcode.SET_DOC, SubdocOpcode.DELETE_DOC):
                    if spec.path or spec.xattr:
                        raise SubdocError(Status.SUBDOC_INVALID_COMBO, "whole-doc op with a path")
                    delete = spec.opcode == SubdocOpcode.DELETE_DOC
                    body, tree = spec.value, []
                    continue
                if spec.xattr:
                    _check_xattr_path(path)
                    _, out = mutate(xattrs, spec.opcode, path, spec.value, mkdir=mkdir)
                else:
                    if not tree:
                        tree.append(_body_tree(body, new))
                    tree[0], out = mutate(tree[0], spec.opcode, path, spec.value, mkdir=mkdir)
                if spec.opcode == SubdocOpcode.COUNTER:
                    results.append((i, out))
            except SubdocError as exc:
                raise KvError(
                    Status.SUBDOC_MULTI_PATH_FAILURE,
                    f"spec {i}: {exc}",
                    value=encode_mutation_failure(i, exc.status),
                ) from None
            except UnicodeDecodeError:
                raise KvError(
                    Status.SUBDOC_MULTI_PATH_FAILURE,
                    f"spec {i}: path is not UTF-8",
                    value=encode_mutation_failure(i, Status.SUBDOC_PATH_EINVAL),
                ) from None
        if tree:
            body = dumps(tree[0])
        return body, results, delete


def _body_tree(body: bytes, new: bool) -> object:
    """The body as JSON for a path spec: ``{}`` for a document MKDOC creates."""
    if not body and new:
        return {}
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise SubdocError(Status.SUBDOC_DOC_NOT_JSON) from None


def _check_xattr_path(path: str) -> None:
    comps = parse_path(path)
    if not comps or not isinstance(comps[0], str):
        raise SubdocError(Status.SUBDOC_PATH_EINVAL, "an xattr path starts with a name")
    if comps[0].startswith("$"):
        raise SubdocError(Status.SUBDOC_XATTR_CANT_MODIFY_VATTR)


def _check_xattr_order(specs: Sequence[SubdocSpec]) -> None:
    """docs/SubDocument.md: every xattr spec comes before the first body spec."""
    seen_body = False
    for spec in specs:
        if spec.xattr and seen_body:
            raise KvError(Status.SUBDOC_INVALID_XATTR_ORDER, "xattr specs must come first")
        seen_body |= not spec.xattr
