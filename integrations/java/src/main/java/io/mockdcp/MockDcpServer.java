package io.mockdcp;

import java.io.ByteArrayInputStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.security.cert.CertificateException;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.util.List;

/**
 * A running mockdcp server, as a DCP consumer under test reaches it: a Couchbase data node
 * with one bucket (or a cluster of them, {@link MockDcpOptions#nodes()}, seeded on node 0).
 *
 * <p>Implemented by {@link LocalMockDcp} (a {@code mockdcp serve} process on this machine) and
 * {@link MockDcpContainer} (the Docker image, through Testcontainers). Every address here is
 * one a client on this machine uses: for a container, the host and its mapped ports, which
 * the server also puts in its cluster map as {@code alternateAddresses.external}.
 *
 * <p>{@link #close()} stops the server.
 */
public interface MockDcpServer extends AutoCloseable {

  /** The host clients connect to ({@code 127.0.0.1}, or Testcontainers' Docker host). */
  String host();

  /** The KV (memcached binary protocol, DCP) port. */
  int kvPort();

  /** The management HTTP port: Couchbase's bootstrap endpoints and the control API. */
  int httpPort();

  /** Whether the server also serves KV over TLS and HTTPS. */
  boolean tls();

  /**
   * The KV-over-TLS port.
   *
   * @throws IllegalStateException without TLS
   */
  int tlsPort();

  /**
   * The HTTPS management port.
   *
   * @throws IllegalStateException without TLS
   */
  int httpsPort();

  /** The bucket's name ({@code default} unless a scenario or an option names another). */
  String bucket();

  /** A user of the bucket ({@code Administrator} unless an option names another). */
  String username();

  /** That user's password. */
  String password();

  /** The client of the control API ({@code /mock/...} on the HTTP port). */
  MockDcpControl control();

  /** Stops the server (idempotent). */
  @Override
  void close();

  /**
   * The cluster's data nodes, node 0 first (the one {@link #kvPort()} and {@link #httpPort()}
   * reach). One unless the server was started with more ({@link MockDcpOptions#nodes()}).
   */
  default List<MockDcpNode> nodes() {
    return List.of(new MockDcpNode(0, host(), kvPort(), httpPort(),
        tls() ? tlsPort() : null, tls() ? httpsPort() : null));
  }

  /** Replica copies of each vbucket ({@link MockDcpOptions#replicas()}). */
  default int replicas() {
    return 0;
  }

  /** {@code couchbase://host:kvPort}: the seed of an SDK or a DCP client. */
  default String connectionString() {
    return "couchbase://" + host() + ":" + kvPort();
  }

  /**
   * {@code couchbases://host:tlsPort}.
   *
   * @throws IllegalStateException without TLS
   */
  default String tlsConnectionString() {
    return "couchbases://" + host() + ":" + tlsPort();
  }

  /** {@code host:kvPort}, as java-dcp-client's {@code seedNodes(...)} takes it. */
  default String seedNode() {
    return host() + ":" + kvPort();
  }

  /** {@code http://host:httpPort}. */
  default URI httpUri() {
    return URI.create("http://" + host() + ":" + httpPort());
  }

  /**
   * The CA certificate (PEM) that signs the TLS ports' certificate, as {@code GET
   * /mock/ca.pem} serves it.
   *
   * @throws MockDcpException without TLS (the server answers 404)
   */
  default String caPem() {
    return control().caPem();
  }

  /** {@link #caPem()} parsed, e.g. for java-dcp-client's {@code trustCertificates(List.of(...))}. */
  default X509Certificate caCertificate() {
    try {
      CertificateFactory factory = CertificateFactory.getInstance("X.509");
      byte[] pem = caPem().getBytes(StandardCharsets.US_ASCII);
      return (X509Certificate) factory.generateCertificate(new ByteArrayInputStream(pem));
    } catch (CertificateException e) {
      throw new MockDcpException("the server's CA is not a certificate: " + e.getMessage(), e);
    }
  }
}
