package io.mockdcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mockdcp.junit.MockDcp;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** java-dcp-client streams a local server the extension started, and holds the oracle. */
@MockDcp(vbuckets = 16, docs = 500, mode = MockDcp.Mode.LOCAL)
class LocalStreamingTest {

  @Test
  void everyDocumentArrives(MockDcpServer server) throws Exception {
    assertTrue(server instanceof LocalMockDcp, "mode LOCAL runs mockdcp serve");
    Map<String, String> expected = DcpCollector.expected(server);
    assertEquals(500, expected.size());
    try (DcpCollector consumer = DcpCollector.start(server)) {
      consumer.awaitDocuments(expected, Duration.ofSeconds(60));

      // writes while it streams: the typed builders and a step as raw JSON
      server.control().steps(
          Steps.set("user::ada", Map.of("name", "Ada", "langs", java.util.List.of("en"))),
          Steps.delete(expected.keySet().iterator().next()),
          Steps.generate(50, "late", 0));
      server.control().stepsJson("[{\"set\": {\"key\": \"raw\", \"value\": \"as is\"}}]");
      Map<String, String> after = DcpCollector.expected(server);
      assertEquals(500 + 1 - 1 + 50 + 1, after.size());
      assertEquals(Json.MAPPER.readTree("{\"name\": \"Ada\", \"langs\": [\"en\"]}"),
          Json.MAPPER.readTree(after.get("user::ada")));
      assertEquals("as is", after.get("raw"));
      consumer.awaitDocuments(after, Duration.ofSeconds(60));
    }
    State state = server.control().state();
    assertEquals(server.bucket(), state.bucket());
    assertEquals(16, state.numVbuckets());
    assertTrue(state.totals().get("streams_opened") >= 16, state.totals().toString());
  }

  @Test
  void theServerIsSharedByTheClass(MockDcpServer server, MockDcpControl control) {
    assertEquals(server.httpUri(), control.baseUri());
    assertTrue(control.isHealthy());
    assertEquals("couchbase://127.0.0.1:" + server.kvPort(), server.connectionString());
  }
}
