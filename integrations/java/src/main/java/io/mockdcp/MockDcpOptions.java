package io.mockdcp;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * What server to start: the options of {@code mockdcp serve} the helpers set, shared by
 * {@link LocalMockDcp} and {@link MockDcpContainer}. Immutable; each {@code withX} returns a
 * copy.
 *
 * <pre>{@code
 * MockDcpOptions options = MockDcpOptions.defaults().withVbuckets(64).withDocs(1000).withTls(true);
 * }</pre>
 *
 * @param scenario a scenario to serve (its bucket, seed and steps): a YAML file (a path, or a
 *     classpath resource such as {@code scenarios/my.yaml}) or the name of a scenario bundled
 *     with mockdcp ({@code mockdcp scenarios} lists them, e.g. {@code rollback-after-failover});
 *     null for none
 * @param vbuckets the bucket's vbuckets (1..1024); null for the server's default (1024) or the
 *     scenario's
 * @param docs seeded Faker documents loaded before the server is ready (default 0; a scenario
 *     brings its own data)
 * @param tls also serve KV over TLS and HTTPS ({@code --tls})
 * @param nodes data nodes of the cluster, all in one {@code mockdcp serve} process, each with
 *     its own KV and HTTP ports ({@code --nodes N}; 1, the default, passes nothing). The
 *     server's ports are node 0's, the seed a client is given; the others are in the cluster
 *     map every node serves ({@link MockDcpServer#nodes()} lists them). Local mode only: {@link
 *     MockDcpContainer} publishes one node's ports and refuses more
 * @param replicas replica copies of each vbucket, each on another node ({@code --replicas N};
 *     0, the default, passes nothing): 0..3 and fewer than {@code nodes}, checked before a
 *     server starts
 * @param bucket the bucket's name; null for {@code default}
 * @param user a user of the bucket (and of the control API off loopback)
 * @param password that user's password
 * @param args more {@code mockdcp serve} arguments, e.g. {@code --collections inventory.hotel}
 * @param startupTimeout how long to wait for the server to be ready
 */
public record MockDcpOptions(
    String scenario,
    Integer vbuckets,
    int docs,
    boolean tls,
    int nodes,
    int replicas,
    String bucket,
    String user,
    String password,
    List<String> args,
    Duration startupTimeout) {

  public static final String DEFAULT_USER = "Administrator";
  public static final String DEFAULT_PASSWORD = "password";
  public static final String DEFAULT_BUCKET = "default";
  /** The most replicas a Couchbase bucket has. */
  public static final int MAX_REPLICAS = 3;

  public MockDcpOptions {
    Objects.requireNonNull(user, "user");
    Objects.requireNonNull(password, "password");
    Objects.requireNonNull(startupTimeout, "startupTimeout");
    args = List.copyOf(args);
    if (vbuckets != null && (vbuckets < 1 || vbuckets > 1024)) {
      throw new IllegalArgumentException("vbuckets must be in 1..1024, not " + vbuckets);
    }
    if (docs < 0) {
      throw new IllegalArgumentException("docs must be >= 0, not " + docs);
    }
    if (nodes < 1) {
      throw new IllegalArgumentException("nodes must be >= 1, not " + nodes);
    }
    if (replicas < 0 || replicas > MAX_REPLICAS) {
      throw new IllegalArgumentException(
          "replicas must be in 0.." + MAX_REPLICAS + ", not " + replicas);
    }
    if (scenario != null && docs > 0) {
      throw new IllegalArgumentException("a scenario seeds its own data: drop docs");
    }
  }

  /** One node, no replicas, the server's default vbuckets, no documents, no TLS, no scenario. */
  public static MockDcpOptions defaults() {
    return new MockDcpOptions(null, null, 0, false, 1, 0, null, DEFAULT_USER, DEFAULT_PASSWORD,
        List.of(), Duration.ofSeconds(60));
  }

  public MockDcpOptions withScenario(String scenario) {
    return new MockDcpOptions(scenario, vbuckets, docs, tls, nodes, replicas, bucket, user,
        password, args, startupTimeout);
  }

  public MockDcpOptions withVbuckets(Integer vbuckets) {
    return new MockDcpOptions(scenario, vbuckets, docs, tls, nodes, replicas, bucket, user,
        password, args, startupTimeout);
  }

  public MockDcpOptions withDocs(int docs) {
    return new MockDcpOptions(scenario, vbuckets, docs, tls, nodes, replicas, bucket, user,
        password, args, startupTimeout);
  }

  public MockDcpOptions withTls(boolean tls) {
    return new MockDcpOptions(scenario, vbuckets, docs, tls, nodes, replicas, bucket, user,
        password, args, startupTimeout);
  }

  public MockDcpOptions withNodes(int nodes) {
    return new MockDcpOptions(scenario, vbuckets, docs, tls, nodes, replicas, bucket, user,
        password, args, startupTimeout);
  }

  /**
   * Replica copies of each vbucket (0..3, fewer than {@link #nodes()}; set the nodes first or
   * after, the pair is checked when a server starts).
   */
  public MockDcpOptions withReplicas(int replicas) {
    return new MockDcpOptions(scenario, vbuckets, docs, tls, nodes, replicas, bucket, user,
        password, args, startupTimeout);
  }

  public MockDcpOptions withBucket(String bucket) {
    return new MockDcpOptions(scenario, vbuckets, docs, tls, nodes, replicas, bucket, user,
        password, args, startupTimeout);
  }

  public MockDcpOptions withCredentials(String user, String password) {
    return new MockDcpOptions(scenario, vbuckets, docs, tls, nodes, replicas, bucket, user,
        password, args, startupTimeout);
  }

  public MockDcpOptions withArgs(String... args) {
    return new MockDcpOptions(scenario, vbuckets, docs, tls, nodes, replicas, bucket, user,
        password, List.of(args), startupTimeout);
  }

  public MockDcpOptions withStartupTimeout(Duration startupTimeout) {
    return new MockDcpOptions(scenario, vbuckets, docs, tls, nodes, replicas, bucket, user,
        password, args, startupTimeout);
  }

  /** The bucket's name as the server will have it, unless a scenario names another. */
  public String bucketName() {
    return bucket == null ? DEFAULT_BUCKET : bucket;
  }

  /**
   * Checks what one option cannot check alone: each replica of a vbucket needs a node of its
   * own, so {@code replicas < nodes}.
   *
   * @throws IllegalArgumentException if the nodes cannot hold the replicas
   */
  public MockDcpOptions checkCluster() {
    if (replicas >= nodes) {
      throw new IllegalArgumentException(replicas + " replica(s) need at least " + (replicas + 1)
          + " nodes, each copy of a vbucket on a node of its own: nodes is " + nodes);
    }
    return this;
  }

  /**
   * The {@code mockdcp serve} arguments of these options but the addresses, the TLS ports and
   * the scenario, which each mode gives its own way.
   *
   * @throws IllegalArgumentException if the nodes cannot hold the replicas ({@link
   *     #checkCluster()})
   */
  List<String> serveArgs() {
    checkCluster();
    List<String> out = new ArrayList<>();
    if (vbuckets != null) {
      out.addAll(List.of("--vbuckets", vbuckets.toString()));
    }
    if (scenario == null) {
      out.addAll(List.of("--docs", Integer.toString(docs))); // serve's own default is 1000
    }
    if (bucket != null) {
      out.addAll(List.of("--bucket", bucket));
    }
    if (!user.equals(DEFAULT_USER) || !password.equals(DEFAULT_PASSWORD)) {
      out.addAll(List.of("--user", user, "--password", password));
    }
    // a node serves TLS by default (mockdcp serve too): without tls(true), none
    out.add(tls ? "--tls" : "--no-tls");
    if (nodes != 1) {
      out.addAll(List.of("--nodes", Integer.toString(nodes)));
    }
    if (replicas != 0) {
      out.addAll(List.of("--replicas", Integer.toString(replicas)));
    }
    out.addAll(args);
    return out;
  }
}
