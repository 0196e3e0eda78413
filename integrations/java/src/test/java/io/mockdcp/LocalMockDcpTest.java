package io.mockdcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The local-process mode: start, ready time, errors, stop, a cluster of nodes; and the options'
 * command line.
 */
class LocalMockDcpTest {

  /**
   * A start slower than this (median, ms; -Dmockdcp.readyBudgetMillis) is broken, not slow: the
   * figure is printed, and the start's speed is measured by {@code mockdcp bench startup}, not by
   * a timed test that fails when the machine is busy.
   */
  private static final long READY_BUDGET_MS = Long.getLong("mockdcp.readyBudgetMillis", 5000);
  private static final int RUNS = 7;

  @Test
  void isReadyWithinTheBudget() {
    LocalMockDcp.start().close(); // the first run warms the JVM's side and the OS's caches
    List<Long> millis = new ArrayList<>();
    for (int i = 0; i < RUNS; i++) {
      long t0 = System.nanoTime();
      try (LocalMockDcp server = LocalMockDcp.start()) {
        millis.add((System.nanoTime() - t0) / 1_000_000);
        assertTrue(server.control().isHealthy(), "ready means the control API answers");
      }
    }
    Collections.sort(millis);
    long median = millis.get(RUNS / 2);
    System.out.println("mockdcp-junit: LocalMockDcp.start() ready in " + millis
        + " ms, median " + median + " ms");
    assertTrue(median < READY_BUDGET_MS, "median " + median + " ms, runs " + millis);
  }

  @Test
  void closeStopsTheProcess() {
    LocalMockDcp server = LocalMockDcp.start();
    assertTrue(server.isRunning());
    server.close();
    assertFalse(server.isRunning());
    assertFalse(server.control().isHealthy());
    server.close(); // idempotent
  }

  @Test
  void aServerThatExitsReportsItsStderr() {
    MockDcpException failed = assertThrows(MockDcpException.class,
        () -> LocalMockDcp.start(MockDcpOptions.defaults().withArgs("--vbuckets", "5000")));
    assertTrue(failed.getMessage().contains("a bucket has 1..1024 vbuckets, not 5000"),
        failed.getMessage());
  }

  @Test
  void anUnknownScenarioNamesTheBundledOnes() {
    MockDcpException failed = assertThrows(MockDcpException.class,
        () -> LocalMockDcp.start(MockDcpOptions.defaults().withScenario("no-such-scenario")));
    assertTrue(failed.getMessage().contains("rollback-after-failover"), failed.getMessage());
  }

  @Test
  void theReadyLineIsRead() {
    assertEquals(java.util.Map.of("event", "ready", "kv_port", "123", "ca_file",
            "/h\u00e9/\"q\"\\x"),
        LocalMockDcp.flatJson("{\"event\": \"ready\", \"kv_port\": 123, \"none\": null, "
            + "\"ca_file\": \"/h\\u00e9/\\\"q\\\"\\\\x\"}"));
    // a nested member is kept whole: its nodes' ports are not the server's
    String nodes = "[{\"kv_port\": 1, \"name\": \"a]\\\"}\"}, {\"kv_port\": 2, \"tls_port\": null}]";
    assertEquals(Map.of("kv_port", "123", "nodes", nodes, "replicas", "1", "host", "h"),
        LocalMockDcp.flatJson("{\"kv_port\": 123, \"nodes\": " + nodes
            + ", \"replicas\": 1, \"host\": \"h\"}"));
  }

  /**
   * Three nodes and a replica: the seed's HTTP port serves a map of three nodes, the ones
   * {@code nodes()} lists, with one replica of each vbucket on another node than its active.
   */
  @Test
  void runsAClusterOfNodesWithReplicas() throws Exception {
    MockDcpOptions options = MockDcpOptions.defaults().withNodes(3).withReplicas(1)
        .withVbuckets(8);
    try (LocalMockDcp server = LocalMockDcp.start(options)) {
      List<MockDcpNode> nodes = server.nodes();
      assertEquals(3, nodes.size(), nodes.toString());
      assertEquals(1, server.replicas());
      assertEquals(server.kvPort(), nodes.get(0).kvPort());
      assertEquals(server.httpPort(), nodes.get(0).httpPort());
      Set<Integer> ports = new HashSet<>();
      nodes.forEach(node -> ports.addAll(List.of(node.kvPort(), node.httpPort())));
      assertEquals(6, ports.size(), "every node has ports of its own: " + nodes);

      JsonNode map = clusterMap(server);
      JsonNode nodesExt = map.path("nodesExt");
      assertEquals(3, nodesExt.size(), map.toString());
      for (int i = 0; i < 3; i++) {
        JsonNode services = nodesExt.get(i).path("services");
        assertEquals(nodes.get(i).kvPort(), services.path("kv").asInt(), services.toString());
        assertEquals(nodes.get(i).httpPort(), services.path("mgmt").asInt(), services.toString());
      }
      JsonNode vbuckets = map.path("vBucketServerMap");
      assertEquals(1, vbuckets.path("numReplicas").asInt(), vbuckets.toString());
      assertEquals(8, vbuckets.path("vBucketMap").size(), vbuckets.toString());
      for (JsonNode chain : vbuckets.path("vBucketMap")) {
        assertEquals(2, chain.size(), chain.toString());
        assertTrue(chain.get(1).asInt() >= 0 && chain.get(1).asInt() != chain.get(0).asInt(),
            chain.toString());
      }
    }
  }

  /** Two nodes cannot hold two replicas: refused before any process starts. */
  @Test
  void replicasTheNodesCannotHoldAreRefusedBeforeStarting() {
    IllegalArgumentException refused = assertThrows(IllegalArgumentException.class,
        () -> LocalMockDcp.start(MockDcpOptions.defaults().withNodes(2).withReplicas(2)));
    assertTrue(refused.getMessage().contains("2 replica(s) need at least 3 nodes"),
        refused.getMessage());
    assertThrows(IllegalArgumentException.class,
        () -> LocalMockDcp.start(MockDcpOptions.defaults().withReplicas(1)));
  }

  /** A container publishes one node's ports: more nodes are refused before it starts. */
  @Test
  void aContainerRefusesMoreThanOneNode() {
    try (MockDcpContainer container = new MockDcpContainer()) {
      IllegalArgumentException refused = assertThrows(IllegalArgumentException.class,
          () -> container.withNodes(3));
      assertTrue(refused.getMessage().contains("publishes one node's ports"),
          refused.getMessage());
      assertThrows(IllegalArgumentException.class, () -> container.withReplicas(1));
      assertEquals(1, container.options().nodes()); // unchanged
    }
  }

  private static JsonNode clusterMap(MockDcpServer server) throws Exception {
    String credentials = server.username() + ":" + server.password();
    HttpRequest request = HttpRequest.newBuilder(
            URI.create(server.httpUri() + "/pools/default/b/" + server.bucket()))
        .header("Authorization", "Basic " + Base64.getEncoder().encodeToString(
            credentials.getBytes(StandardCharsets.UTF_8)))
        .build();
    HttpResponse<String> response = HttpClient.newHttpClient()
        .send(request, HttpResponse.BodyHandlers.ofString());
    assertEquals(200, response.statusCode(), response.body());
    return Json.MAPPER.readTree(response.body());
  }

  @Test
  void optionsMakeTheCommandLine() {
    MockDcpOptions defaults = MockDcpOptions.defaults();
    assertEquals(List.of("--docs", "0", "--no-tls"), defaults.serveArgs());
    assertEquals(List.of("--vbuckets", "64", "--docs", "10", "--tls"),
        defaults.withVbuckets(64).withDocs(10).withTls(true).serveArgs());
    assertEquals(List.of("--no-tls"), defaults.withScenario("x").serveArgs());
    // nodes and replicas: passed only when not the default (1 node, no replicas)
    assertFalse(defaults.withNodes(1).serveArgs().contains("--nodes"));
    assertFalse(defaults.serveArgs().contains("--replicas"));
    assertEquals(List.of("--docs", "0", "--no-tls", "--nodes", "3"),
        defaults.withNodes(3).serveArgs());
    assertEquals(List.of("--docs", "0", "--no-tls", "--nodes", "3", "--replicas", "2"),
        defaults.withReplicas(2).withNodes(3).serveArgs()); // either order
    assertEquals(
        List.of("--docs", "0", "--user", "u", "--password", "p", "--no-tls", "--seed", "9"),
        defaults.withCredentials("u", "p").withArgs("--seed", "9").serveArgs());
    assertThrows(IllegalArgumentException.class, () -> defaults.withScenario("x").withDocs(1));
    assertThrows(IllegalArgumentException.class, () -> defaults.withVbuckets(0));
    assertThrows(IllegalArgumentException.class, () -> defaults.withNodes(0));
    assertThrows(IllegalArgumentException.class, () -> defaults.withReplicas(-1));
    assertThrows(IllegalArgumentException.class, () -> defaults.withNodes(5).withReplicas(4));
    assertThrows(IllegalArgumentException.class, () -> defaults.withNodes(2).withReplicas(2)
        .serveArgs());
  }
}
