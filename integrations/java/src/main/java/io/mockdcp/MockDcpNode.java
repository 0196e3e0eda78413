package io.mockdcp;

/**
 * A data node of the server's cluster, as a client on this machine reaches it.
 *
 * @param number the node's index in the cluster (0 is the seed: {@link MockDcpServer#kvPort()}
 *     and {@link MockDcpServer#httpPort()} are its ports)
 * @param host the host its ports listen on
 * @param kvPort its KV (memcached binary protocol, DCP) port
 * @param httpPort its management HTTP port
 * @param tlsPort its KV-over-TLS port; null without TLS
 * @param httpsPort its HTTPS management port; null without TLS
 */
public record MockDcpNode(
    int number, String host, int kvPort, int httpPort, Integer tlsPort, Integer httpsPort) {

  /** {@code host:kvPort}, as java-dcp-client's {@code seedNodes(...)} takes it. */
  public String seedNode() {
    return host + ":" + kvPort;
  }
}
