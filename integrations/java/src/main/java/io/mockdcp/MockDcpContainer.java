package io.mockdcp;

import com.github.dockerjava.api.command.InspectContainerResponse;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.testcontainers.DockerClientFactory;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.containers.Network;
import org.testcontainers.containers.wait.strategy.Wait;
import org.testcontainers.images.builder.Transferable;
import org.testcontainers.utility.DockerImageName;

/**
 * mockdcp's Docker image as a Testcontainers container.
 *
 * <pre>{@code
 * try (MockDcpContainer mock = new MockDcpContainer().withVbuckets(64).withDocs(100)) {
 *   mock.start();
 *   Client client = Client.builder().seedNodes(mock.seedNode()) ...
 * }
 * }</pre>
 *
 * <p>The image is {@value #DEFAULT_IMAGE} unless the constructor, the system property {@value
 * #IMAGE_PROPERTY} or the environment variable {@value #IMAGE_ENV} names another; build it with
 * {@code docker build -f docker/Dockerfile -t mockdcp .} in the mockdcp repository.
 *
 * <p>Mapped ports: clients reach the node at the Docker host and random host ports, which its
 * cluster map must name as {@code alternateAddresses.external} for a client seeded there to
 * keep using them. Those ports are known only once the container runs, so the container's
 * process waits for them: it starts a small Python program of the image (its {@code python3})
 * that waits for a file this class copies in as soon as the ports are mapped, then runs {@code
 * mockdcp serve --host 0.0.0.0} with {@code MOCKDCP_EXTERNAL_HOST}, {@code
 * MOCKDCP_EXTERNAL_KV_PORT}, {@code MOCKDCP_EXTERNAL_HTTP_PORT} (and with TLS {@code
 * MOCKDCP_EXTERNAL_KV_TLS_PORT}, {@code MOCKDCP_EXTERNAL_HTTPS_PORT}) set to them. No host port
 * is chosen in advance, so nothing can take it first (Testcontainers' Kafka module starts the
 * same way). The container is ready when {@code /mock/health} answers.
 */
public class MockDcpContainer extends GenericContainer<MockDcpContainer> implements MockDcpServer {

  public static final String DEFAULT_IMAGE = "mockdcp:latest";
  public static final String IMAGE_PROPERTY = "mockdcp.image";
  public static final String IMAGE_ENV = "MOCKDCP_IMAGE";
  public static final int KV_PORT = 11210;
  public static final int HTTP_PORT = 8091;
  public static final int KV_TLS_PORT = 11207;
  public static final int HTTPS_PORT = 18091;

  /** Where the start file goes (the image has a world-writable /tmp). */
  private static final String START_FILE = "/tmp/mockdcp-start.json";
  private static final String SCENARIO_FILE = "/tmp/mockdcp-scenario.yaml";
  /**
   * Runs in the container: waits for the start file, resolves a bundled scenario's name to its
   * file, then becomes {@code mockdcp serve --host 0.0.0.0 ARGS} with the file's environment.
   */
  private static final String STARTER = String.join("\n",
      "import json, os, time",
      "while True:",
      "    try:",
      "        with open('" + START_FILE + "') as f:",
      "            start = json.load(f)",
      "        break",
      "    except (OSError, ValueError):",
      "        time.sleep(0.02)",
      "args = start['args']",
      "scenario = start.get('scenario')",
      "if scenario:",
      "    if not os.path.isfile(scenario):",
      "        from importlib import resources",
      "        bundled = resources.files('mockdcp') / 'scenarios' / (scenario + '.yaml')",
      "        scenario = str(bundled) if bundled.is_file() else scenario",
      "    args += ['--scenario', scenario]",
      "os.environ.update(start['env'])",
      "os.execvp('mockdcp', ['mockdcp', 'serve', '--host', '0.0.0.0'] + args)");

  private MockDcpOptions options = MockDcpOptions.defaults();
  /** The network this container made for itself on an engine without a default bridge. */
  private Network ownNetwork;
  private MockDcpControl control;
  private String bucket;

  /** The image {@value #IMAGE_PROPERTY}, {@value #IMAGE_ENV} or {@value #DEFAULT_IMAGE} names. */
  public MockDcpContainer() {
    this(defaultImage());
  }

  public MockDcpContainer(String image) {
    this(DockerImageName.parse(image));
  }

  public MockDcpContainer(DockerImageName image) {
    super(image);
  }

  /** The image name the no-argument constructor uses. */
  public static String defaultImage() {
    String image = System.getProperty(IMAGE_PROPERTY, System.getenv(IMAGE_ENV));
    return image == null || image.isBlank() ? DEFAULT_IMAGE : image;
  }

  /**
   * All the options at once (replacing those set before).
   *
   * @throws IllegalArgumentException for more than one node (the container publishes one
   *     node's ports: run a cluster with {@link LocalMockDcp}) or replicas, which need more
   */
  public MockDcpContainer withOptions(MockDcpOptions options) {
    if (options.nodes() != 1) {
      throw new IllegalArgumentException("nodes = " + options.nodes() + ": MockDcpContainer "
          + "publishes one node's ports, so it runs one node; run a cluster with LocalMockDcp "
          + "(@MockDcp(mode = LOCAL))");
    }
    this.options = options.checkCluster();
    return self();
  }

  /** A scenario: a file, a classpath resource or a bundled scenario's name. */
  public MockDcpContainer withScenario(String scenario) {
    return withOptions(options.withScenario(scenario));
  }

  public MockDcpContainer withVbuckets(int vbuckets) {
    return withOptions(options.withVbuckets(vbuckets));
  }

  public MockDcpContainer withDocs(int docs) {
    return withOptions(options.withDocs(docs));
  }

  /** Also serve KV over TLS (11207) and HTTPS (18091). */
  public MockDcpContainer withTls(boolean tls) {
    return withOptions(options.withTls(tls));
  }

  /**
   * Cluster nodes: 1, the only number a container runs ({@link #withOptions} refuses more
   * before anything starts; {@link LocalMockDcp} runs a cluster).
   */
  public MockDcpContainer withNodes(int nodes) {
    return withOptions(options.withNodes(nodes));
  }

  /**
   * Replica copies of each vbucket: only 0 in a container, which runs one node ({@link
   * #withOptions} refuses more before anything starts).
   */
  public MockDcpContainer withReplicas(int replicas) {
    return withOptions(options.withReplicas(replicas));
  }

  /** More {@code mockdcp serve} arguments. */
  public MockDcpContainer withServeArgs(String... args) {
    return withOptions(options.withArgs(args));
  }

  /** The options the container starts with. */
  public MockDcpOptions options() {
    return options;
  }

  @Override
  protected void configure() {
    if (getNetwork() == null && !engineHasDefaultBridge()) {
      ownNetwork = Network.newNetwork();
      withNetwork(ownNetwork);
    }
    List<Integer> ports = new ArrayList<>(List.of(KV_PORT, HTTP_PORT));
    if (options.tls()) {
      ports.addAll(List.of(KV_TLS_PORT, HTTPS_PORT));
    }
    setExposedPorts(ports);
    withCreateContainerCmdModifier(cmd -> cmd.withEntrypoint("python3", "-c", STARTER));
    if (options.scenario() != null) {
      ScenarioSource source = ScenarioSource.of(options.scenario());
      if (source.bundled() == null) {
        withCopyToContainer(Transferable.of(read(source), 0100644), SCENARIO_FILE);
      }
    }
    waitingFor(Wait.forHttp("/mock/health").forPort(HTTP_PORT).forStatusCode(200)
        .withStartupTimeout(options.startupTimeout()));
  }

  /**
   * Whether the engine has Docker's default {@code bridge} network, which a container without a
   * network of its own joins. An engine started with {@code dockerd --bridge=none} has none: there
   * the container gets a network of its own (removed when it stops), as testcontainers-go does,
   * so that its ports can be published.
   */
  static boolean engineHasDefaultBridge() {
    return DockerClientFactory.instance().client().listNetworksCmd().withNameFilter("bridge")
        .exec().stream().anyMatch(network -> "bridge".equals(network.getName()));
  }

  @Override
  public void stop() {
    super.stop();
    if (ownNetwork != null) {
      ownNetwork.close();
      ownNetwork = null;
    }
  }

  @Override
  protected void containerIsStarting(InspectContainerResponse containerInfo) {
    Map<String, String> env = new LinkedHashMap<>();
    env.put("MOCKDCP_EXTERNAL_HOST", getHost());
    env.put("MOCKDCP_EXTERNAL_KV_PORT", getMappedPort(KV_PORT).toString());
    env.put("MOCKDCP_EXTERNAL_HTTP_PORT", getMappedPort(HTTP_PORT).toString());
    if (options.tls()) {
      env.put("MOCKDCP_EXTERNAL_KV_TLS_PORT", getMappedPort(KV_TLS_PORT).toString());
      env.put("MOCKDCP_EXTERNAL_HTTPS_PORT", getMappedPort(HTTPS_PORT).toString());
    }
    Map<String, Object> start = new LinkedHashMap<>();
    start.put("args", options.serveArgs());
    start.put("env", env);
    if (options.scenario() != null) {
      ScenarioSource source = ScenarioSource.of(options.scenario());
      start.put("scenario", source.bundled() != null ? source.bundled() : SCENARIO_FILE);
    }
    try {
      byte[] json = Json.MAPPER.writeValueAsBytes(start);
      copyFileToContainer(Transferable.of(json, 0100644), START_FILE);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  @Override
  protected void containerIsStarted(InspectContainerResponse containerInfo) {
    control = new MockDcpControl(httpUri(), options.user(), options.password());
    bucket = control.state().bucket();
  }

  @Override
  public String host() {
    return getHost();
  }

  @Override
  public int kvPort() {
    return getMappedPort(KV_PORT);
  }

  @Override
  public int httpPort() {
    return getMappedPort(HTTP_PORT);
  }

  @Override
  public boolean tls() {
    return options.tls();
  }

  @Override
  public int tlsPort() {
    requireTls();
    return getMappedPort(KV_TLS_PORT);
  }

  @Override
  public int httpsPort() {
    requireTls();
    return getMappedPort(HTTPS_PORT);
  }

  @Override
  public String bucket() {
    return bucket != null ? bucket : options.bucketName();
  }

  @Override
  public String username() {
    return options.user();
  }

  @Override
  public String password() {
    return options.password();
  }

  /** @throws IllegalStateException before the container started */
  @Override
  public MockDcpControl control() {
    if (control == null) {
      throw new IllegalStateException("the container is not started");
    }
    return control;
  }

  @Override
  public void close() {
    stop();
  }

  private void requireTls() {
    if (!options.tls()) {
      throw new IllegalStateException("the container has no TLS ports (withTls(true))");
    }
  }

  private static byte[] read(ScenarioSource source) {
    try {
      if (source.file() != null) {
        return Files.readAllBytes(source.file());
      }
      try (InputStream in = source.resource().openStream()) {
        return in.readAllBytes();
      }
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read scenario " + source, e);
    }
  }
}
