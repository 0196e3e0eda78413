package io.mockdcp;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Base64;
import java.util.List;

/**
 * A client of mockdcp's control API ({@code /mock/...} on the management HTTP port): apply
 * steps, run a scenario, read the state, the oracle and the expectations.
 *
 * <p>Steps are the scenario vocabulary, as JSON: {@link Steps} builds the common ones, {@link
 * Step#of} any other, and {@link #stepsJson} posts a JSON array as written. A refused request
 * throws {@link MockDcpException} with the server's problem document (a bad step list changes
 * nothing: the server checks it whole first).
 *
 * <p>Thread-safe. The requests carry the bucket user's Basic credentials, which the API asks
 * for off loopback (a container).
 */
public final class MockDcpControl {

  private static final Duration READ_TIMEOUT = Duration.ofSeconds(30);

  private final URI base;
  private final String authorization;

  /**
   * @param base the management port's address, e.g. {@code http://127.0.0.1:8091}
   * @param user a bucket user, for the API's Basic authentication off loopback
   * @param password the user's password
   */
  public MockDcpControl(URI base, String user, String password) {
    this.base = base;
    String credentials = user + ":" + password;
    this.authorization = "Basic "
        + Base64.getEncoder().encodeToString(credentials.getBytes(StandardCharsets.UTF_8));
  }

  /**
   * One HTTP client for every server, made on the first request: a test that only streams
   * never pays for it (a few hundred ms in a fresh JVM).
   */
  private static final class Http {
    static final HttpClient CLIENT =
        HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  }

  /** The management port's address. */
  public URI baseUri() {
    return base;
  }

  /**
   * Applies the steps, in order, before it returns: a {@code wait} step holds the answer until
   * it is met (so a consumer under test must run in another thread meanwhile).
   */
  public Applied steps(Step... steps) {
    return steps(List.of(steps));
  }

  /** {@link #steps(Step...)} with a list. */
  public Applied steps(List<Step> steps) {
    try {
      return stepsJson(Json.MAPPER.writeValueAsString(steps));
    } catch (JsonProcessingException e) {
      throw new MockDcpException("steps cannot be written as JSON: " + e.getMessage(), e);
    }
  }

  /** Applies steps given as a JSON array, e.g. {@code [{"failover": {"vbuckets": [0]}}]}. */
  public Applied stepsJson(String json) {
    return read(send("steps", json, null), Applied.class);
  }

  /**
   * Runs a scenario (a scenario file's YAML, or the same as JSON) in the background against
   * this server's bucket; {@link #awaitScenario} waits for its end.
   */
  public ScenarioStarted scenario(String yamlOrJson) {
    String type = yamlOrJson.stripLeading().startsWith("{") ? "application/json" : null;
    return read(send("scenario", yamlOrJson, type), ScenarioStarted.class);
  }

  /** Connections, streams, per-vbucket seqnos and the scenario's progress. */
  public State state() {
    return read(get("state"), State.class);
  }

  /** {@code GET /mock/state} whole, as Json.MAPPER. */
  public JsonNode stateJson() {
    return read(get("state"), JsonNode.class);
  }

  /** The documents a correct consumer holds now: one row per live document, sorted by scope,
   * collection and key. */
  public List<OracleRow> oracle() {
    return read(get("oracle"), Rows.class).rows();
  }

  /** The outcomes of the {@code expect} steps applied so far. */
  public Expectations expectations() {
    return read(get("expectations"), Expectations.class);
  }

  /**
   * Waits until a scenario's steps (the scenario the server was started with, or one {@link
   * #scenario} posted) have all run, then returns the expectations; at once on a server that
   * never ran steps. Not for steps posted with {@link #steps}, which have all run when it
   * returns: the server's progress of those never says finished, so this would wait out
   * {@code timeout}.
   *
   * @throws MockDcpException if they stopped on a failure or are still running after {@code
   *     timeout}
   */
  public Expectations awaitScenario(Duration timeout) {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (true) {
      State.Progress progress = state().scenario();
      if (progress == null || progress.finished()) {
        return expectations();
      }
      if (progress.failure() != null) {
        throw new MockDcpException("the scenario stopped: " + progress.failure());
      }
      if (System.nanoTime() > deadline) {
        throw new MockDcpException("the scenario is still running after " + timeout
            + " (at " + progress.current() + ")");
      }
      sleep(Duration.ofMillis(50));
    }
  }

  /** The CA certificate (PEM) that signs the TLS ports' certificate (404 without TLS). */
  public String caPem() {
    return get("ca").body();
  }

  /** Whether {@code /mock/health} answers. */
  public boolean isHealthy() {
    try {
      HttpResponse<String> response = Http.CLIENT.send(request("health").build(),
          HttpResponse.BodyHandlers.ofString());
      return response.statusCode() == Route.named("health").status();
    } catch (IOException e) {
      return false;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  /** The control API's OpenAPI document. */
  public JsonNode openApi() {
    return read(get("openapi"), JsonNode.class);
  }

  // ---------------------------------------------------------------------------------------

  private HttpRequest.Builder request(String name) {
    Route route = Route.named(name);
    return HttpRequest.newBuilder(base.resolve(route.path()))
        .header("Authorization", authorization)
        .header("Accept", route.response());
  }

  private HttpResponse<String> get(String name) {
    Route route = Route.named(name);
    return exchange(route, request(name).timeout(READ_TIMEOUT).GET().build());
  }

  /** A POST; no timeout: wait steps hold the answer as long as they wait. */
  private HttpResponse<String> send(String name, String body, String contentType) {
    Route route = Route.named(name);
    HttpRequest request = request(name)
        .header("Content-Type", contentType != null ? contentType : route.request())
        .method(route.method(), HttpRequest.BodyPublishers.ofString(body))
        .build();
    return exchange(route, request);
  }

  private HttpResponse<String> exchange(Route route, HttpRequest request) {
    HttpResponse<String> response;
    try {
      response = Http.CLIENT.send(request, HttpResponse.BodyHandlers.ofString());
    } catch (ConnectException e) {
      throw new MockDcpException(route.method() + " " + request.uri()
          + ": cannot connect (is the server running?)", e);
    } catch (IOException e) {
      throw new MockDcpException(route.method() + " " + request.uri() + ": " + e, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new MockDcpException(route.method() + " " + request.uri() + ": interrupted", e);
    }
    if (response.statusCode() != route.status()) {
      throw refused(route, response);
    }
    return response;
  }

  private static MockDcpException refused(Route route, HttpResponse<String> response) {
    String what = route.method() + " " + route.path() + " answered " + response.statusCode();
    JsonNode problem = null;
    try {
      problem = Json.MAPPER.readTree(response.body());
    } catch (JsonProcessingException e) {
      // not a problem document: the body is the message
    }
    String detail = problem != null && problem.hasNonNull("detail")
        ? problem.get("detail").asText()
        : response.body();
    return new MockDcpException(what + ": " + detail, response.statusCode(), problem);
  }

  private static <T> T read(HttpResponse<String> response, Class<T> type) {
    try {
      return Json.MAPPER.readValue(response.body(), type);
    } catch (JsonProcessingException e) {
      throw new MockDcpException(response.request().method() + " " + response.uri()
          + ": unexpected answer: " + e.getOriginalMessage(), e);
    }
  }

  static void sleep(Duration duration) {
    try {
      Thread.sleep(duration.toMillis());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new MockDcpException("interrupted", e);
    }
  }

  /** {@code GET /mock/oracle}'s answer. */
  private record Rows(List<OracleRow> rows) {}
}
