package io.mockdcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.mockdcp.junit.MockDcp;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Base64;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The image through Testcontainers: clients on this machine reach it at mapped ports, which its
 * cluster map names as the external address. Runs only when a Docker engine has the image
 * ({@link MockDcpContainer#defaultImage()}); skipped otherwise, with the reason.
 */
class ContainerTest {

  /** Why the container tests cannot run here: checked once, each test skipped with it. */
  private static Optional<String> unavailable;

  @BeforeAll
  static void lookForTheImage() {
    unavailable = DockerImages.unavailable(MockDcpContainer.defaultImage());
  }

  @BeforeEach
  void requireTheImage() {
    assumeTrue(unavailable.isEmpty(), () -> "container test skipped: " + unavailable.orElseThrow());
  }

  @Test
  void clientsOnTheHostStreamThroughTheMappedPorts() throws Exception {
    try (MockDcpContainer mock = new MockDcpContainer().withVbuckets(16).withDocs(300)
        .withTls(true)) {
      mock.start();
      JsonNode external = clusterMap(mock).at("/nodesExt/0/alternateAddresses/external");
      assertEquals(mock.host(), external.path("hostname").asText(), external.toString());
      JsonNode ports = external.path("ports");
      assertEquals(mock.kvPort(), ports.path("kv").asInt(), external.toString());
      assertEquals(mock.httpPort(), ports.path("mgmt").asInt(), external.toString());
      assertEquals(mock.tlsPort(), ports.path("kvSSL").asInt(), external.toString());
      assertEquals(mock.httpsPort(), ports.path("mgmtSSL").asInt(), external.toString());

      var expected = DcpCollector.expected(mock);
      assertEquals(300, expected.size());
      try (DcpCollector plain = DcpCollector.start(mock)) {
        plain.awaitDocuments(expected, Duration.ofSeconds(60));
      }
      try (DcpCollector tls = DcpCollector.start(mock, true)) {
        tls.awaitDocuments(expected, Duration.ofSeconds(60));
      }
    }
  }

  @Test
  @MockDcp(scenario = "rollback-after-failover", mode = MockDcp.Mode.CONTAINER)
  void theExtensionRunsABundledScenarioInAContainer(MockDcpServer server) throws Exception {
    assertInstanceOf(MockDcpContainer.class, server);
    try (DcpCollector consumer = DcpCollector.start(server)) {
      Expectations outcome = server.control().awaitScenario(Duration.ofSeconds(60));
      assertTrue(outcome.passed(), outcome.toString());
      consumer.awaitDocuments(DcpCollector.expected(server), Duration.ofSeconds(30));
      assertTrue(consumer.rollbacks() >= 4, "rollbacks: " + consumer.rollbacks());
    }
  }

  @Test
  @MockDcp(scenario = "scenarios/two-writes.yaml", mode = MockDcp.Mode.CONTAINER)
  void aClasspathScenarioIsCopiedIn(MockDcpServer server) {
    assertEquals("orders", server.bucket());
    server.control().awaitScenario(Duration.ofSeconds(20));
    assertEquals(List.of("order::1", "order::2"),
        server.control().oracle().stream().map(OracleRow::key).toList());
  }

  /** The bucket's cluster map as the management port serves it to clients. */
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
}
