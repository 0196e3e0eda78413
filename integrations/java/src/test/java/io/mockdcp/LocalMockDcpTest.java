package io.mockdcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The local-process mode: start, ready time, errors, stop; and the options' command line. */
class LocalMockDcpTest {

  /** How long a server may take to be ready (median), ms: -Dmockdcp.readyBudgetMillis. */
  private static final long READY_BUDGET_MS = Long.getLong("mockdcp.readyBudgetMillis", 1000);
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
  }

  @Test
  void optionsMakeTheCommandLine() {
    MockDcpOptions defaults = MockDcpOptions.defaults();
    assertEquals(List.of("--docs", "0"), defaults.serveArgs());
    assertEquals(List.of("--vbuckets", "64", "--docs", "10", "--tls"),
        defaults.withVbuckets(64).withDocs(10).withTls(true).serveArgs());
    assertEquals(List.of(), defaults.withScenario("x").serveArgs());
    // nodes: mockdcp serves one node; --nodes is passed only for another number
    assertFalse(defaults.withNodes(1).serveArgs().contains("--nodes"));
    assertEquals(List.of("--docs", "0", "--nodes", "3"), defaults.withNodes(3).serveArgs());
    assertEquals(List.of("--docs", "0", "--user", "u", "--password", "p", "--seed", "9"),
        defaults.withCredentials("u", "p").withArgs("--seed", "9").serveArgs());
    assertThrows(IllegalArgumentException.class, () -> defaults.withScenario("x").withDocs(1));
    assertThrows(IllegalArgumentException.class, () -> defaults.withVbuckets(0));
    assertThrows(IllegalArgumentException.class, () -> defaults.withNodes(0));
  }
}
