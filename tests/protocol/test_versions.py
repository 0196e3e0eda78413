"""The server version profiles: each difference between 7.0, 7.2, 7.6 and 8.0 the table
holds, and how a version string names a profile."""

from __future__ import annotations

import pytest

from mockdcp.protocol import (
    DEFAULT_PROFILE,
    PROFILES,
    SERVER_VERSION,
    HelloFeature,
    StreamFlag,
    UnknownServerVersion,
    cluster_config,
    history_unsupported,
    resolve_server_version,
)

F = HelloFeature


def test_the_profiles_are_the_four_releases_and_the_default_is_the_newest() -> None:
    assert list(PROFILES) == ["7.0", "7.2", "7.6", "8.0"]
    assert DEFAULT_PROFILE is PROFILES["8.0"]
    assert SERVER_VERSION == "8.0.0-3777-enterprise"
    assert [p.version.split("-")[0] for p in PROFILES.values()] == [
        "7.0.0",
        "7.2.0",
        "7.6.2",
        "8.0.0",
    ]


def test_hello_features_appear_with_their_release() -> None:
    v70, v72, v76, v80 = PROFILES.values()
    assert v70.features == v72.features  # 7.2's feature.h stops at 0x19 as 7.0's
    new_in_76 = {
        F.SUBDOC_REPLICA_READ,
        F.GET_CLUSTER_CONFIG_WITH_KNOWN_VERSION,
        F.DEDUPE_NOT_MY_VBUCKET_CLUSTERMAP,
        F.CLUSTERMAP_CHANGE_NOTIFICATION_BRIEF,
        F.SUBDOC_ALLOWS_ACCESS_ON_MULTIPLE_XATTR_KEYS,
    }
    assert v76.features - v72.features == new_in_76
    assert v80.features - v76.features == {F.SUBDOC_BINARY_XATTR}
    assert {F.COLLECTIONS, F.DUPLEX, F.CLUSTERMAP_CHANGE_NOTIFICATION} <= v70.features
    # newer than 8.0 (kv_engine master): in no profile
    assert all(F.DCP_SKIP_DELETES_IN_INITIAL_BACKFILL not in p.features for p in PROFILES.values())


def test_controls_appear_with_their_release() -> None:
    v70, v72, v76, v80 = PROFILES.values()
    assert v72.controls - v70.controls == {"change_streams", "flatbuffers_system_events"}
    assert v76.controls == v72.controls
    assert v80.controls - v76.controls == {"max_marker_version"}
    assert (v70.oso_seqno_advanced, v72.oso_seqno_advanced) == (False, True)
    assert [(p.history, p.marker_v2_2) for p in PROFILES.values()] == [
        (False, False),
        (True, False),
        (True, False),
        (True, True),
    ]
    assert all("cache_transfer" not in p.controls for p in PROFILES.values())


def test_stream_flags_appear_with_their_release_and_are_checked_from_72() -> None:
    v70, v72, v76, v80 = PROFILES.values()
    assert not v70.stream_flags & (StreamFlag.IGNORE_PURGED_TOMBSTONES | StreamFlag.FROM_LATEST)
    assert v72.stream_flags & ~v70.stream_flags == StreamFlag.IGNORE_PURGED_TOMBSTONES
    assert v76.stream_flags & ~v72.stream_flags == StreamFlag.FROM_LATEST
    assert v80.stream_flags == v76.stream_flags
    assert [p.checks_stream_flags for p in PROFILES.values()] == [False, True, True, True]
    assert all(not p.stream_flags & StreamFlag.CACHE_TRANSFER for p in PROFILES.values())


def test_compat_versions_as_ns_server_writes_them() -> None:
    assert [p.cluster_compatibility for p in PROFILES.values()] == [
        0x70000,
        0x70002,
        0x70006,
        0x80000,
    ]
    assert [p.compat_version for p in PROFILES.values()] == ["7.0", "7.2", "7.6", "8.0"]


def test_bucket_capabilities_by_release() -> None:
    v70, v80 = PROFILES["7.0"], PROFILES["8.0"]
    caps = {p.name: set(p.bucket_capabilities(history=True)) for p in PROFILES.values()}
    assert "dcp.IgnorePurgedTombstones" not in caps["7.0"]
    assert "nonDedupedHistory" not in caps["7.0"]  # no history before 7.2
    assert caps["7.2"] - caps["7.0"] == {
        "subdoc.ReviveDocument",
        "dcp.IgnorePurgedTombstones",
        "nonDedupedHistory",
    }
    assert caps["7.6"] - caps["7.2"] == {
        "preserveExpiry",
        "querySystemCollection",
        "mobileSystemCollection",
        "subdoc.ReplicaRead",
        "rangeScan",
    }
    assert caps["8.0"] - caps["7.6"] == {"subdoc.BinaryXattr", "subdoc.AccessDeleted"}
    assert "nonDedupedHistory" not in v80.bucket_capabilities(history=False)
    config = cluster_config(
        bucket="b",
        bucket_uuid="u",
        host="h",
        kv_port=1,
        http_port=2,
        num_vbuckets=4,
        rev=1,
        profile=v70,
    )
    assert config["bucketCapabilities"] == v70.bucket_capabilities(history=False)


@pytest.mark.parametrize(
    ("text", "name", "version"),
    [
        ("7.0", "7.0", "7.0.0-5302-enterprise"),
        ("8.0", "8.0", "8.0.0-3777-enterprise"),
        ("7.2.4-7070-enterprise", "7.2", "7.2.4-7070-enterprise"),
        ("7.6.5", "7.6", "7.6.5"),
    ],
)
def test_a_version_names_its_profile(text: str, name: str, version: str) -> None:
    profile = resolve_server_version(text)
    assert (profile.name, profile.version) == (name, version)


@pytest.mark.parametrize(
    ("text", "says"),
    [("7.1", "7.1 is not one of 7.0, 7.2, 7.6, 8.0"), ("9.9.9", "9.9"), ("latest", "latest")],
)
def test_an_unknown_version_is_refused_by_name(text: str, says: str) -> None:
    with pytest.raises(UnknownServerVersion, match=says):
        resolve_server_version(text)


def test_history_retention_needs_72() -> None:
    problem = history_unsupported(PROFILES["7.0"], retains_history=True)
    assert problem is not None
    assert "7.2 or later, not 7.0" in problem
    assert history_unsupported(PROFILES["7.0"], retains_history=False) is None
    assert history_unsupported(PROFILES["7.2"], retains_history=True) is None
