package io.mockdcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mockdcp.junit.MockDcp;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Scenarios and steps: a failover that loses writes the consumer has, which it must undo. */
class ScenarioTest {

  /** The bundled scenario, by name: its steps run once the consumer has every item. */
  @Test
  @MockDcp(scenario = "rollback-after-failover", mode = MockDcp.Mode.LOCAL)
  void theBundledRollbackScenarioPasses(MockDcpServer server) throws Exception {
    try (DcpCollector consumer = DcpCollector.start(server)) {
      Expectations outcome = server.control().awaitScenario(Duration.ofSeconds(60));
      assertTrue(outcome.passed(), outcome.toString());
      // two rollbacks and the protocol checker's conformant: true
      assertEquals(3, outcome.expectations().size(), outcome.toString());
      consumer.awaitDocuments(DcpCollector.expected(server), Duration.ofSeconds(30));
      assertTrue(consumer.rollbacks() >= 4, "a rollback per vbucket: " + consumer.rollbacks());
    }
  }

  /** The same failure, told step by step with the typed builders. */
  @Test
  @MockDcp(vbuckets = 4, mode = MockDcp.Mode.LOCAL)
  void aFailoverStepMakesTheConsumerRollBack(MockDcpServer server) throws Exception {
    MockDcpControl control = server.control();
    control.steps(
        Steps.pausePersistence(),
        Steps.generate(20),
        Steps.persist(),                 // doc::000000..19 are on disk
        Steps.generate(20, "doc", 20));  // doc::000020..39 are not
    assertEquals(Boolean.TRUE, control.state().persistencePaused());
    try (DcpCollector consumer = DcpCollector.start(server)) {
      Applied applied = control.steps(
          Steps.waitForConsumer(),       // the consumer has all 40
          Steps.label("failover"),
          Steps.failover(),              // which loses the last 20
          Steps.expectRollback(0, Duration.ofSeconds(20)),
          Steps.expectRollback(3, Duration.ofSeconds(20)),
          Steps.resumePersistence());
      assertEquals(6, applied.applied());
      assertEquals("failover", applied.progress().label());
      Map<String, String> expected = DcpCollector.expected(server);
      assertEquals(20, expected.size());
      consumer.awaitDocuments(expected, Duration.ofSeconds(30));
      Expectations outcome = control.expectations();
      assertTrue(outcome.passed(), outcome.toString());
      assertEquals(List.of(true, true),
          outcome.expectations().stream().map(Expectations.Expectation::passed).toList());
    }
  }

  /** A scenario on the classpath (src/test/resources), with a bucket of its own. */
  @Test
  @MockDcp(scenario = "scenarios/two-writes.yaml", mode = MockDcp.Mode.LOCAL)
  void aClasspathScenarioNamesItsBucket(MockDcpServer server) throws Exception {
    assertEquals("orders", server.bucket());
    server.control().awaitScenario(Duration.ofSeconds(10));
    assertEquals(List.of("order::1", "order::2"),
        server.control().oracle().stream().map(OracleRow::key).toList());
    try (DcpCollector consumer = DcpCollector.start(server)) {
      consumer.awaitDocuments(DcpCollector.expected(server), Duration.ofSeconds(30));
    }
  }

  /** A scenario posted to a running server runs in the background. */
  @Test
  @MockDcp(vbuckets = 2, mode = MockDcp.Mode.LOCAL)
  void aPostedScenarioRuns(MockDcpControl control) {
    ScenarioStarted started = control.scenario(String.join("\n",
        "name: posted",
        "steps:",
        "  - set: {key: a, value: {n: 1}}",
        "  - expect: {acked: 0, within: 1s}"));
    assertEquals("posted", started.scenario());
    assertEquals(2, started.steps());
    Expectations outcome = control.awaitScenario(Duration.ofSeconds(20));
    assertEquals(1, outcome.expectations().size());
    assertEquals("a", control.oracle().get(0).key());
  }

  /** A bad step list is refused whole (422, each error placed) and changes nothing. */
  @Test
  @MockDcp(vbuckets = 2, mode = MockDcp.Mode.LOCAL)
  void aBadStepListChangesNothing(MockDcpControl control) {
    MockDcpException refused = assertThrows(MockDcpException.class, () -> control.steps(
        Steps.set("k", "v"),
        Step.of("generate", Map.of("docz", 5))));
    assertEquals(422, refused.status());
    assertNotNull(refused.problem());
    assertEquals("/1/generate", refused.problem().get("errors").get(1).get("pointer").asText());
    assertTrue(refused.getMessage().contains("unknown fields: docz"), refused.getMessage());
    assertTrue(control.oracle().isEmpty());
    assertFalse(control.expectations().expectations().iterator().hasNext());
  }
}
