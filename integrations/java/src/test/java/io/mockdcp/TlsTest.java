package io.mockdcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mockdcp.junit.MockDcp;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** TLS: java-dcp-client streams the TLS port, trusting the CA from caPem(). */
class TlsTest {

  @Test
  @MockDcp(tls = true, vbuckets = 8, docs = 200, mode = MockDcp.Mode.LOCAL)
  void streamsOverTlsTrustingTheServersCa(MockDcpServer server) throws Exception {
    assertTrue(server.tls());
    assertTrue(server.caPem().startsWith("-----BEGIN CERTIFICATE-----"), server.caPem());
    assertEquals("couchbases://127.0.0.1:" + server.tlsPort(), server.tlsConnectionString());
    assertTrue(server.httpsPort() > 0);
    try (DcpCollector consumer = DcpCollector.start(server, true)) {
      consumer.awaitDocuments(DcpCollector.expected(server), Duration.ofSeconds(60));
      assertTrue(server.control().state().connections().size() >= 1);
    }
  }

  @Test
  @MockDcp(vbuckets = 1, mode = MockDcp.Mode.LOCAL)
  void withoutTlsThereIsNoTlsPortNorCa(MockDcpServer server) {
    assertFalse(server.tls());
    assertThrows(IllegalStateException.class, server::tlsPort);
    assertEquals(404, assertThrows(MockDcpException.class, server::caPem).status());
  }
}
