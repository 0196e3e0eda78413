package io.mockdcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.mockdcp.junit.MockDcp;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.RecordComponent;
import java.lang.reflect.Type;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/**
 * The client against the server's own description of its API ({@code /mock/openapi.json}):
 * every route in {@code control-routes.json} (the one list of what the client calls) exists
 * with its method, request and response content types, status and each response field the
 * client reads; the records the client reads answers into read only listed fields; and every
 * typed step builder makes a step the server accepts.
 */
@MockDcp(vbuckets = 2, mode = MockDcp.Mode.LOCAL)
class ControlContractTest {

  /** The record each route's answer is read into, and where in the answer. */
  private static final Map<String, Map.Entry<String, Class<?>>> READ_INTO = Map.of(
      "state", Map.entry("", State.class),
      "steps", Map.entry("", Applied.class),
      "scenario", Map.entry("", ScenarioStarted.class),
      "oracle", Map.entry("rows[].", OracleRow.class),
      "expectations", Map.entry("", Expectations.class));

  @Test
  void everyRouteTheClientCallsIsInTheOpenApiDocument(MockDcpControl control) {
    JsonNode api = control.openApi();
    assertEquals(Set.of("health", "state", "steps", "scenario", "oracle", "expectations", "ca",
        "openapi"), Route.ALL.keySet());
    List<String> problems = new ArrayList<>();
    for (Route route : Route.ALL.values()) {
      JsonNode operation = api.path("paths").path(route.path())
          .path(route.method().toLowerCase(Locale.ROOT));
      if (operation.isMissingNode()) {
        problems.add(route.method() + " " + route.path() + " is not in the document");
        continue;
      }
      if (route.request() != null
          && operation.path("requestBody").path("content").path(route.request()).isMissingNode()) {
        problems.add(route.name() + ": takes no " + route.request());
      }
      JsonNode answer = operation.path("responses").path(Integer.toString(route.status()));
      JsonNode content = answer.path("content").path(route.response());
      if (content.isMissingNode()) {
        problems.add(route.name() + ": no " + route.status() + " " + route.response() + " answer");
        continue;
      }
      for (String field : route.fields()) {
        if (resolve(api, content.path("schema"), field).isEmpty()) {
          problems.add(route.name() + ": the answer has no field " + field);
        }
      }
    }
    assertEquals(List.of(), problems);
  }

  @Test
  void theClientReadsOnlyListedFields() {
    List<String> unlisted = new ArrayList<>();
    READ_INTO.forEach((name, into) -> {
      List<String> listed = Route.named(name).fields();
      for (String field : fields(into.getValue(), into.getKey())) {
        if (!listed.contains(field)) {
          unlisted.add(name + ": " + field);
        }
      }
    });
    assertEquals(List.of(), unlisted, "fields the records read that control-routes.json lacks");
  }

  @Test
  void everyTypedStepIsOneTheServerAccepts(MockDcpControl control) throws Exception {
    Map<String, Step> samples = samples();
    TreeSet<String> builders = new TreeSet<>();
    for (Method method : Steps.class.getDeclaredMethods()) {
      if (Modifier.isPublic(method.getModifiers()) && method.getReturnType() == Step.class) {
        builders.add(method.getName());
      }
    }
    assertEquals(builders, new TreeSet<>(samples.keySet()), "a sample of every builder");

    // the step names are in the OpenAPI document's vocabulary
    JsonNode names = control.openApi().at("/paths/~1mock~1steps/post/requestBody/content/"
        + "application~1json/schema/items/propertyNames/enum");
    Set<String> vocabulary = new TreeSet<>();
    names.forEach(n -> vocabulary.add(n.asText()));
    for (Step step : samples.values()) {
      assertTrue(vocabulary.contains(step.name()), step.name() + " is not a step");
    }

    // their fields are the scenario schema's (mockdcp/scenario/scenario.schema.json)
    Path schemaFile = Path.of(System.getProperty("mockdcp.repository", "../.."),
        "mockdcp", "scenario", "scenario.schema.json");
    if (Files.isRegularFile(schemaFile)) {
      JsonNode schema = new ObjectMapper().readTree(schemaFile.toFile());
      Map<String, JsonNode> byStep = new LinkedHashMap<>();
      schema.at("/properties/steps/items/oneOf").forEach(branch ->
          branch.path("properties").fields().forEachRemaining(e -> byStep.put(e.getKey(),
              e.getValue())));
      for (Step step : samples.values()) {
        Set<String> known = new TreeSet<>();
        for (JsonNode branch : expand(schema, byStep.get(step.name()))) {
          branch.path("properties").fieldNames().forEachRemaining(known::add);
        }
        for (String field : step.fields().keySet()) {
          assertTrue(known.contains(field), step + ": the schema has no field " + field);
        }
      }
    }

    // and the server accepts them: the list is checked whole before any step runs, so a bad
    // last step gets it refused, every error on that step, with nothing applied
    List<Step> all = new ArrayList<>(samples.values());
    all.add(Step.of("no_such_step", Map.of()));
    MockDcpException refused = null;
    try {
      control.steps(all);
    } catch (MockDcpException e) {
      refused = e;
    }
    assertNotNull(refused, "the list was applied");
    assertEquals(422, refused.status(), refused.getMessage());
    for (JsonNode error : refused.problem().get("errors")) {
      assertEquals(all.size() - 1, error.get("step").asInt(), refused.getMessage());
    }
    assertTrue(control.oracle().isEmpty());
  }

  /** A step from every typed builder, by the builder's name. */
  private static Map<String, Step> samples() {
    Duration second = Duration.ofSeconds(1);
    Map<String, Step> s = new LinkedHashMap<>();
    s.put("set", Steps.set("k", Map.of("a", 1)));
    s.put("delete", Steps.delete("k"));
    s.put("expire", Steps.expire("k"));
    s.put("generate", Steps.generate(3, "g", 0));
    s.put("checkpoint", Steps.checkpoint(0));
    s.put("persist", Steps.persist());
    s.put("persistUpTo", Steps.persistUpTo(1));
    s.put("pausePersistence", Steps.pausePersistence());
    s.put("resumePersistence", Steps.resumePersistence());
    s.put("purge", Steps.purge());
    s.put("dropCursor", Steps.dropCursor(0, 1));
    s.put("restart", Steps.restart());
    s.put("failover", Steps.failover(1));
    s.put("moveVbucket", Steps.moveVbucket(0));
    s.put("flush", Steps.flush());
    // in this order: each user step is checked against what the ones before it did
    s.put("createUser", Steps.createUser("u", "secret1", "bucket_admin[default]"));
    s.put("grant", Steps.grant("u", "data_dcp_reader[default]"));
    s.put("revoke", Steps.revoke("u", "bucket_admin[default]"));
    s.put("changePassword", Steps.changePassword("u", "secret2"));
    s.put("deleteUser", Steps.deleteUser("u"));
    s.put("createScope", Steps.createScope("s"));
    s.put("createCollection", Steps.createCollection("s.c"));
    s.put("dropCollection", Steps.dropCollection("s.c"));
    s.put("dropScope", Steps.dropScope("s"));
    s.put("createBucket", Steps.createBucket("b").with("flush_enabled", true));
    s.put("deleteBucket", Steps.deleteBucket("b"));
    s.put("disconnect", Steps.disconnect());
    s.put("stall", Steps.stall(second));
    s.put("endStream", Steps.endStream("too_slow"));
    s.put("reject", Steps.reject("dcp_stream_req", "etmpfail"));
    s.put("waitFor", Steps.waitFor(Duration.ofMillis(10)));
    s.put("waitForConsumer", Steps.waitForConsumer().with("timeout", second));
    s.put("expectRollback", Steps.expectRollback(0, 5, second));
    s.put("expectResume", Steps.expectResume(0, 1, second));
    s.put("label", Steps.label("here"));
    return s;
  }

  /** The answer fields a record reads, as paths (snake_case, as the client's mapper). */
  private static List<String> fields(Class<?> type, String prefix) {
    List<String> out = new ArrayList<>();
    for (RecordComponent component : type.getRecordComponents()) {
      String path = prefix + snake(component.getName());
      out.add(path);
      Type generic = component.getGenericType();
      if (component.getType().isRecord()) {
        out.addAll(fields(component.getType(), path + "."));
      } else if (generic instanceof ParameterizedType list && component.getType() == List.class
          && list.getActualTypeArguments()[0] instanceof Class<?> item && item.isRecord()) {
        out.addAll(fields(item, path + "[]."));
      }
    }
    return out;
  }

  private static String snake(String camel) {
    return camel.replaceAll("([A-Z])", "_$1").toLowerCase(Locale.ROOT);
  }

  /** The schema of {@code path} inside {@code schema} (following $ref, oneOf, anyOf). */
  private static List<JsonNode> resolve(JsonNode api, JsonNode schema, String path) {
    List<JsonNode> here = expand(api, schema);
    for (String part : path.split("\\.")) {
      boolean items = part.endsWith("[]");
      String name = items ? part.substring(0, part.length() - 2) : part;
      List<JsonNode> next = new ArrayList<>();
      for (JsonNode s : here) {
        JsonNode property = s.path("properties").path(name);
        if (property.isMissingNode()) {
          continue;
        }
        for (JsonNode p : expand(api, property)) {
          if (!items) {
            next.add(p);
          } else if (p.has("items")) {
            next.addAll(expand(api, p.get("items")));
          }
        }
      }
      here = next;
    }
    return here;
  }

  private static List<JsonNode> expand(JsonNode api, JsonNode schema) {
    if (schema.has("$ref")) {
      String pointer = schema.get("$ref").asText().substring(1);
      return expand(api, api.at(pointer));
    }
    List<JsonNode> out = new ArrayList<>(List.of(schema));
    for (String combinator : Arrays.asList("oneOf", "anyOf", "allOf")) {
      schema.path(combinator).forEach(branch -> out.addAll(expand(api, branch)));
    }
    return out;
  }

  @Test
  void theResolverFindsFieldsAndMissesOthers(MockDcpControl control) {
    JsonNode api = control.openApi();
    JsonNode oracle = api.at("/paths/~1mock~1oracle/get/responses/200/content/"
        + "application~1json/schema");
    assertEquals(1, resolve(api, oracle, "rows[].key").size());
    if (!resolve(api, oracle, "rows[].no_such_field").isEmpty()) {
      fail("a missing field resolved");
    }
  }
}
