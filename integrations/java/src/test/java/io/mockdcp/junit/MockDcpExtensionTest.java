package io.mockdcp.junit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mockdcp.LocalMockDcp;
import io.mockdcp.MockDcpServer;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

/** Which server a parameter gets: the method's own, else the class's (shared), and modes. */
@MockDcp(vbuckets = 2, mode = MockDcp.Mode.LOCAL)
class MockDcpExtensionTest {

  private static MockDcpServer classServer;

  @BeforeAll
  static void remember(MockDcpServer server) {
    classServer = server;
  }

  @Test
  void theClassServerIsShared(MockDcpServer server) {
    assertSame(classServer, server);
    assertEquals(2, server.control().state().numVbuckets());
  }

  @Test
  @MockDcp(vbuckets = 3, mode = MockDcp.Mode.LOCAL)
  void aMethodGetsItsOwn(MockDcpServer server) {
    assertNotEquals(classServer.kvPort(), server.kvPort());
    assertEquals(3, server.control().state().numVbuckets());
  }

  @Test
  @MockDcp(vbuckets = 4, nodes = 3, replicas = 1, mode = MockDcp.Mode.LOCAL)
  void nodesAndReplicasRunACluster(MockDcpServer server) {
    assertEquals(3, server.nodes().size(), server.nodes().toString());
    assertEquals(1, server.replicas());
    assertEquals(server.kvPort(), server.nodes().get(0).kvPort());
  }

  @Test
  void aClusterInAContainerIsRefusedBeforeStarting() {
    @MockDcp(nodes = 2, mode = MockDcp.Mode.CONTAINER)
    class Annotated {}
    MockDcp config = Annotated.class.getAnnotation(MockDcp.class);
    IllegalArgumentException refused = assertThrows(IllegalArgumentException.class,
        () -> MockDcpExtension.start(config));
    assertTrue(refused.getMessage().contains("publishes one node's ports"), refused.getMessage());
  }

  @Nested
  class Nested_ {
    @Test
    void aNestedClassGetsTheEnclosingOne(MockDcpServer server) {
      assertEquals(2, server.control().state().numVbuckets());
    }
  }

  @Test
  void autoMeansLocalWithTheCommandElseContainer() {
    MockDcp.Mode auto = MockDcpExtension.mode(MockDcp.Mode.AUTO);
    assertEquals(LocalMockDcp.isAvailable() ? MockDcp.Mode.LOCAL : MockDcp.Mode.CONTAINER, auto);
    assertEquals(MockDcp.Mode.CONTAINER, MockDcpExtension.mode(MockDcp.Mode.CONTAINER));
    String before = System.getProperty(MockDcpExtension.MODE_PROPERTY);
    try {
      System.setProperty(MockDcpExtension.MODE_PROPERTY, "container");
      assertEquals(MockDcp.Mode.CONTAINER, MockDcpExtension.mode(MockDcp.Mode.AUTO));
      assertEquals(MockDcp.Mode.LOCAL, MockDcpExtension.mode(MockDcp.Mode.LOCAL));
    } finally {
      if (before == null) {
        System.clearProperty(MockDcpExtension.MODE_PROPERTY);
      } else {
        System.setProperty(MockDcpExtension.MODE_PROPERTY, before);
      }
    }
  }

  @Test
  void docsWithAScenarioIsAnError() {
    @MockDcp(scenario = "stall", docs = 5)
    class Annotated {}
    MockDcp config = Annotated.class.getAnnotation(MockDcp.class);
    assertThrows(IllegalArgumentException.class, () -> MockDcpExtension.options(config));
  }
}
