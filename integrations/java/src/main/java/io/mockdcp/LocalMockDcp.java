package io.mockdcp;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Deque;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Consumer;

/**
 * A mockdcp server in a process of this machine: {@code mockdcp serve --port 0 --http-port 0
 * --json ...} (free ports, loopback), ready when it prints its ready line, stopped by {@link
 * #close()} (and when the JVM exits). With {@link MockDcpOptions#nodes()} above 1 the process
 * runs that many data nodes, each on free ports of its own ({@link #nodes()}).
 *
 * <pre>{@code
 * try (LocalMockDcp server = LocalMockDcp.start(MockDcpOptions.defaults().withDocs(100))) {
 *   Client client = Client.builder().seedNodes(server.seedNode()) ...
 * }
 * }</pre>
 *
 * <p>The command is {@code mockdcp} on {@code PATH}, or the one the system property {@value
 * #COMMAND_PROPERTY} or the environment variable {@value #COMMAND_ENV} names.
 */
public final class LocalMockDcp implements MockDcpServer {

  public static final String COMMAND_PROPERTY = "mockdcp.command";
  public static final String COMMAND_ENV = "MOCKDCP_COMMAND";
  private static final int STDERR_LINES = 60;
  /** Servers not closed yet: the JVM stops them when it exits. */
  private static final Set<Process> RUNNING = ConcurrentHashMap.newKeySet();
  /** Bundled scenarios' files, by command: {@code mockdcp scenarios --json}, run once. */
  private static final Map<Path, Map<String, Path>> BUNDLED = new ConcurrentHashMap<>();

  static {
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      RUNNING.forEach(Process::destroy); // SIGTERM all, then wait for them together
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
      for (Process process : RUNNING) {
        try {
          process.waitFor(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
          break;
        }
      }
      RUNNING.forEach(LocalMockDcp::kill);
    }, "mockdcp-local-shutdown"));
  }

  private final Process process;
  private final MockDcpOptions options;
  private final Map<String, String> ready;
  private final Deque<String> stderr;
  private final Path tempScenario;
  private final MockDcpControl control;

  private LocalMockDcp(Process process, MockDcpOptions options, Map<String, String> ready,
      Deque<String> stderr, Path tempScenario) {
    this.process = process;
    this.options = options;
    this.ready = ready;
    this.stderr = stderr;
    this.tempScenario = tempScenario;
    this.control = new MockDcpControl(httpUri(), options.user(), options.password());
  }

  /** A server with the default options (no documents). */
  public static LocalMockDcp start() {
    return start(MockDcpOptions.defaults());
  }

  /**
   * Starts a server and returns once it is ready (its documents loaded, both ports listening).
   *
   * @throws IllegalArgumentException if the options' nodes cannot hold their replicas (before
   *     anything starts)
   * @throws MockDcpException if the command is missing, or the server exits or is not ready
   *     within the options' startup timeout (the message has what it wrote on stderr)
   */
  public static LocalMockDcp start(MockDcpOptions options) {
    options.checkCluster();
    Path command = findCommand().orElseThrow(() -> new MockDcpException(
        "mockdcp is not on PATH (pip install mockdcp, or set -D" + COMMAND_PROPERTY + ")"));
    Path tempScenario = null;
    List<String> args = new ArrayList<>(List.of(command.toString(), "serve",
        "--host", "127.0.0.1", "--port", "0", "--http-port", "0", "--json"));
    args.addAll(options.serveArgs());
    if (options.tls()) {
      args.addAll(List.of("--tls-port", "0", "--https-port", "0"));
    }
    if (options.scenario() != null) {
      ScenarioSource source = ScenarioSource.of(options.scenario());
      Path file = source.file();
      if (source.resource() != null) {
        file = resourceFile(source);
        if (!"file".equals(source.resource().getProtocol())) {
          tempScenario = file;
        }
      } else if (source.bundled() != null) {
        file = bundled(command, source.bundled());
      }
      args.addAll(List.of("--scenario", file.toString()));
    }
    return launch(args, options, tempScenario);
  }

  private static LocalMockDcp launch(List<String> args, MockDcpOptions options,
      Path tempScenario) {
    Process process;
    try {
      process = new ProcessBuilder(args).start();
    } catch (IOException e) {
      throw new MockDcpException("cannot run " + String.join(" ", args) + ": " + e, e);
    }
    RUNNING.add(process);
    try {
      process.getOutputStream().close(); // the server reads nothing
    } catch (IOException e) {
      // nothing to close
    }
    Deque<String> stderr = new ArrayDeque<>();
    Thread errors = drain(process.getErrorStream(), "mockdcp-stderr", line -> {
      synchronized (stderr) {
        if (stderr.size() == STDERR_LINES) {
          stderr.removeFirst();
        }
        stderr.addLast(line);
      }
    });
    CompletableFuture<Map<String, String>> readyLine = new CompletableFuture<>();
    drain(process.getInputStream(), "mockdcp-stdout", line -> {
      if (!readyLine.isDone() && line.startsWith("{") && line.contains("\"ready\"")) {
        readyLine.complete(flatJson(line));
      }
    });
    process.onExit().thenRun(() -> readyLine.completeExceptionally(
        new IllegalStateException("exited with status " + process.exitValue())));
    try {
      Map<String, String> ready = readyLine.get(options.startupTimeout().toMillis(), TimeUnit.MILLISECONDS);
      return new LocalMockDcp(process, options, ready, stderr, tempScenario);
    } catch (ExecutionException | TimeoutException | InterruptedException e) {
      if (e instanceof InterruptedException) {
        Thread.currentThread().interrupt();
      }
      stop(process);
      try {
        errors.join(2000); // the rest of its stderr
      } catch (InterruptedException ignored) {
        Thread.currentThread().interrupt();
      }
      String why = e instanceof TimeoutException
          ? "was not ready within " + options.startupTimeout()
          : e.getCause() != null ? e.getCause().getMessage() : e.toString();
      throw new MockDcpException(String.join(" ", args) + " " + why + "; its stderr:\n"
          + tail(stderr), e);
    }
  }

  /**
   * The {@code mockdcp} command: the one {@value #COMMAND_PROPERTY} or {@value #COMMAND_ENV}
   * names, else the first executable {@code mockdcp} on {@code PATH}.
   */
  public static Optional<Path> findCommand() {
    String named = System.getProperty(COMMAND_PROPERTY, System.getenv(COMMAND_ENV));
    if (named != null && !named.isBlank()) {
      return Optional.of(Path.of(named));
    }
    String path = System.getenv("PATH");
    if (path == null) {
      return Optional.empty();
    }
    for (String dir : path.split(File.pathSeparator)) {
      if (dir.isEmpty()) {
        continue;
      }
      Path candidate = Path.of(dir, "mockdcp");
      if (Files.isRegularFile(candidate) && Files.isExecutable(candidate)) {
        return Optional.of(candidate);
      }
    }
    return Optional.empty();
  }

  /** Whether {@link #findCommand()} finds one. */
  public static boolean isAvailable() {
    return findCommand().isPresent();
  }

  @Override
  public String host() {
    return ready.get("host");
  }

  @Override
  public int kvPort() {
    return Integer.parseInt(ready.get("kv_port"));
  }

  @Override
  public int httpPort() {
    return Integer.parseInt(ready.get("http_port"));
  }

  @Override
  public boolean tls() {
    return ready.containsKey("tls_port");
  }

  @Override
  public int tlsPort() {
    return requireTls("tls_port");
  }

  @Override
  public int httpsPort() {
    return requireTls("https_port");
  }

  @Override
  public String bucket() {
    return ready.get("bucket");
  }

  @Override
  public String username() {
    return options.user();
  }

  @Override
  public String password() {
    return options.password();
  }

  @Override
  public MockDcpControl control() {
    return control;
  }

  /**
   * The cluster's nodes as the ready line lists them (node 0, the seed, first); the server's
   * own ports as one node if it does not list them.
   */
  @Override
  public List<MockDcpNode> nodes() {
    String nodes = ready.get("nodes");
    if (nodes == null) {
      return MockDcpServer.super.nodes();
    }
    try {
      List<MockDcpNode> out = new ArrayList<>();
      for (JsonNode node : Json.MAPPER.readTree(nodes)) {
        out.add(new MockDcpNode(node.path("number").asInt(out.size()),
            node.path("host").asText(host()), node.path("kv_port").asInt(),
            node.path("http_port").asInt(), port(node, "tls_port"), port(node, "https_port")));
      }
      return List.copyOf(out);
    } catch (IOException e) {
      throw new MockDcpException("the ready line's nodes are not JSON: " + nodes, e);
    }
  }

  private static Integer port(JsonNode node, String field) {
    JsonNode port = node.path(field);
    return port.isInt() ? port.asInt() : null;
  }

  /** Replica copies of each vbucket, as the ready line says (0 if it does not). */
  @Override
  public int replicas() {
    return Integer.parseInt(ready.getOrDefault("replicas", "0"));
  }

  /**
   * The server's ready line ({@code mockdcp serve --json}): each member as text, e.g. {@code
   * ca_file} (the CA's file, with TLS); {@code nodes} as its JSON text ({@link #nodes()} reads
   * it).
   */
  public Map<String, String> readyLine() {
    return ready;
  }

  /** The last lines the server wrote on stderr (its log). */
  public String stderr() {
    return tail(stderr);
  }

  /** Whether the process still runs. */
  public boolean isRunning() {
    return process.isAlive();
  }

  /** Stops the server: SIGTERM, then SIGKILL after 5 s. */
  @Override
  public void close() {
    stop(process);
    if (tempScenario != null) {
      try {
        Files.deleteIfExists(tempScenario);
      } catch (IOException e) {
        // a temp file left behind
      }
    }
  }

  @Override
  public String toString() {
    return "LocalMockDcp[" + connectionString() + ", http " + httpPort() + "]";
  }

  // ---------------------------------------------------------------------------------------

  private int requireTls(String field) {
    if (!ready.containsKey(field)) {
      throw new IllegalStateException("the server has no TLS ports (start it with TLS on)");
    }
    return Integer.parseInt(ready.get(field));
  }

  private static void stop(Process process) {
    process.destroy();
    try {
      if (!process.waitFor(5, TimeUnit.SECONDS)) {
        kill(process);
        process.waitFor(5, TimeUnit.SECONDS);
      }
    } catch (InterruptedException e) {
      kill(process);
      Thread.currentThread().interrupt();
    }
    RUNNING.remove(process);
  }

  /** SIGKILL to the server and anything it started (a data-loading worker). */
  private static void kill(Process process) {
    process.descendants().forEach(ProcessHandle::destroyForcibly);
    process.destroyForcibly();
  }

  private static Thread drain(InputStream stream, String name,
      Consumer<String> onLine) {
    Thread thread = new Thread(() -> {
      try (BufferedReader reader =
          new BufferedReader(new InputStreamReader(stream, StandardCharsets.UTF_8))) {
        for (String line; (line = reader.readLine()) != null; ) {
          onLine.accept(line);
        }
      } catch (IOException e) {
        // the process is gone
      }
    }, name);
    thread.setDaemon(true);
    thread.start();
    return thread;
  }

  /**
   * The ready line's members as text: a string unescaped, another scalar as written, an array
   * or object (the {@code nodes} list) as its JSON text; null members left out. A small reader
   * of Python's json.dumps output rather than Jackson: in a fresh JVM, loading Jackson takes
   * about as long as the server takes to start, and a test that only streams never needs it.
   * Nested members are kept whole, so that a node's {@code kv_port} is never taken for the
   * server's.
   */
  static Map<String, String> flatJson(String line) {
    Map<String, String> out = new LinkedHashMap<>();
    int n = line.length();
    int i = skipSpace(line, line.indexOf('{') + 1);
    try {
      while (i < n && line.charAt(i) != '}') {
        int nameEnd = endOfString(line, i);
        String name = unescape(line.substring(i + 1, nameEnd - 1));
        i = skipSpace(line, nameEnd);
        if (line.charAt(i) != ':') {
          throw new IllegalArgumentException("no ':' at " + i);
        }
        i = skipSpace(line, i + 1);
        char c = line.charAt(i);
        int end;
        if (c == '"') {
          end = endOfString(line, i);
          out.put(name, unescape(line.substring(i + 1, end - 1)));
        } else if (c == '[' || c == '{') {
          end = endOfNested(line, i);
          out.put(name, line.substring(i, end));
        } else {
          end = i;
          while (end < n && ",}] \t".indexOf(line.charAt(end)) < 0) {
            end++;
          }
          String value = line.substring(i, end);
          if (!value.equals("null")) {
            out.put(name, value);
          }
        }
        i = skipSpace(line, end);
        if (i < n && line.charAt(i) == ',') {
          i = skipSpace(line, i + 1);
        }
      }
    } catch (IndexOutOfBoundsException e) {
      throw new IllegalArgumentException("not a JSON object: " + line, e);
    }
    return Collections.unmodifiableMap(out);
  }

  private static int skipSpace(String s, int i) {
    while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
      i++;
    }
    return i;
  }

  /** The index after the string that starts at {@code i} (its opening quote). */
  private static int endOfString(String s, int i) {
    if (s.charAt(i) != '"') {
      throw new IllegalArgumentException("no string at " + i + ": " + s);
    }
    for (int j = i + 1; ; j++) {
      char c = s.charAt(j);
      if (c == '\\') {
        j++;
      } else if (c == '"') {
        return j + 1;
      }
    }
  }

  /** The index after the array or object that starts at {@code i}. */
  private static int endOfNested(String s, int i) {
    int depth = 0;
    for (int j = i; ; j++) {
      char c = s.charAt(j);
      if (c == '"') {
        j = endOfString(s, j) - 1;
      } else if (c == '[' || c == '{') {
        depth++;
      } else if ((c == ']' || c == '}') && --depth == 0) {
        return j + 1;
      }
    }
  }

  private static String unescape(String s) {
    StringBuilder out = new StringBuilder(s.length());
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c != '\\' || i + 1 == s.length()) {
        out.append(c);
        continue;
      }
      char e = s.charAt(++i);
      switch (e) {
        case 'n' -> out.append('\n');
        case 't' -> out.append('\t');
        case 'r' -> out.append('\r');
        case 'b' -> out.append('\b');
        case 'f' -> out.append('\f');
        case 'u' -> {
          out.append((char) Integer.parseInt(s.substring(i + 1, i + 5), 16));
          i += 4;
        }
        default -> out.append(e); // \" \\ \/
      }
    }
    return out.toString();
  }

  private static String tail(Deque<String> lines) {
    synchronized (lines) {
      return String.join("\n", lines);
    }
  }

  /** A classpath scenario as a file: itself when it is one, else a temp copy. */
  private static Path resourceFile(ScenarioSource source) {
    try {
      if ("file".equals(source.resource().getProtocol())) {
        return Path.of(source.resource().toURI());
      }
      Path copy = Files.createTempFile("mockdcp-scenario-", ".yaml");
      try (InputStream in = source.resource().openStream()) {
        Files.copy(in, copy, StandardCopyOption.REPLACE_EXISTING);
      }
      return copy;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read " + source.resource(), e);
    } catch (URISyntaxException e) {
      throw new IllegalArgumentException(e);
    }
  }

  /** A bundled scenario's file, from {@code mockdcp scenarios --json} (run once). */
  private static Path bundled(Path command, String name) {
    Map<String, Path> scenarios = BUNDLED.computeIfAbsent(command, LocalMockDcp::listBundled);
    Path file = scenarios.get(name);
    if (file == null) {
      throw new MockDcpException("scenario " + name + " is not a file, a classpath resource "
          + "or a scenario bundled with mockdcp (" + String.join(", ", scenarios.keySet()) + ")");
    }
    return file;
  }

  private static Map<String, Path> listBundled(Path command) {
    try {
      Process list = new ProcessBuilder(command.toString(), "scenarios", "--json")
          .redirectError(ProcessBuilder.Redirect.DISCARD)
          .start();
      Map<String, Path> out = new TreeMap<>();
      try (BufferedReader reader = new BufferedReader(
          new InputStreamReader(list.getInputStream(), StandardCharsets.UTF_8))) {
        for (String line; (line = reader.readLine()) != null; ) {
          JsonNode row = Json.MAPPER.readTree(line);
          out.put(row.get("name").asText(), Path.of(row.get("path").asText()));
        }
      }
      if (list.waitFor() != 0) {
        throw new MockDcpException(command + " scenarios --json exited " + list.exitValue());
      }
      return Collections.unmodifiableMap(out);
    } catch (IOException e) {
      throw new MockDcpException("cannot list mockdcp's scenarios: " + e, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new MockDcpException("interrupted", e);
    }
  }
}
