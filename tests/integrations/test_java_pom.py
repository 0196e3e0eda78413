"""The Java helpers' Maven artifact leaves Testcontainers optional: a project gets it only
by adding it, and the container mode's error names the version the pom builds with."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2] / "integrations" / "java"
POM = "{http://maven.apache.org/POM/4.0.0}"


def _pom() -> ET.Element:
    return ET.parse(PROJECT / "pom.xml").getroot()


def test_testcontainers_is_an_optional_dependency() -> None:
    deps = _pom().findall(f"{POM}dependencies/{POM}dependency")
    (testcontainers,) = [d for d in deps if d.findtext(f"{POM}groupId") == "org.testcontainers"]
    assert testcontainers.findtext(f"{POM}optional") == "true"
    assert testcontainers.findtext(f"{POM}scope") in (None, "compile")
    # what a user of the artifact gets: only dependencies neither optional nor test-scoped
    pulled = {
        d.findtext(f"{POM}artifactId")
        for d in deps
        if d.findtext(f"{POM}optional") != "true" and d.findtext(f"{POM}scope") != "test"
    }
    assert pulled == {"jackson-databind", "junit-jupiter-api"}


def test_the_container_modes_error_names_the_poms_testcontainers_version() -> None:
    version = _pom().findtext(f"{POM}properties/{POM}testcontainers.version")
    source = (PROJECT / "src/main/java/io/mockdcp/junit/MockDcpExtension.java").read_text()
    found = re.search(r'TESTCONTAINERS_VERSION = "([^"]+)";', source)
    assert found is not None
    assert found.group(1) == version
    page = (PROJECT.parents[1] / "docs" / "java.md").read_text()  # the Java documentation
    assert f"<artifactId>testcontainers</artifactId>\n  <version>{version}</version>" in page
