package io.mockdcp;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A control API route the client calls, as {@code control-routes.json} (beside this class)
 * lists it: that file is the one list of routes, which the contract test checks against the
 * server's OpenAPI document.
 *
 * @param name the route's name in the file
 * @param method the HTTP method
 * @param path the path
 * @param request the request's content type, or null without a body
 * @param status the status of a successful answer
 * @param response the answer's content type
 * @param fields the answer's members the client reads (paths: {@code a.b}, {@code a[].b})
 */
record Route(String name, String method, String path, String request, int status,
    String response, List<String> fields) {

  static final String RESOURCE = "control-routes.json";

  /** Every route, by name. */
  static final Map<String, Route> ALL = load();

  static Route named(String name) {
    Route route = ALL.get(name);
    if (route == null) {
      throw new IllegalStateException(RESOURCE + " has no route " + name);
    }
    return route;
  }

  private static Map<String, Route> load() {
    try (InputStream in = Route.class.getResourceAsStream(RESOURCE)) {
      if (in == null) {
        throw new IllegalStateException(RESOURCE + " is missing beside " + Route.class.getName());
      }
      JsonNode root = new ObjectMapper().readTree(in);
      Map<String, Route> routes = new LinkedHashMap<>();
      for (Iterator<String> names = root.fieldNames(); names.hasNext(); ) {
        String name = names.next();
        if (name.startsWith("$")) {
          continue;
        }
        JsonNode r = root.get(name);
        List<String> fields = new ArrayList<>();
        r.path("fields").forEach(f -> fields.add(f.asText()));
        routes.put(name, new Route(name, r.get("method").asText(), r.get("path").asText(),
            r.hasNonNull("request") ? r.get("request").asText() : null, r.get("status").asInt(),
            r.get("response").asText(), List.copyOf(fields)));
      }
      return Map.copyOf(routes);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read " + RESOURCE, e);
    }
  }
}
