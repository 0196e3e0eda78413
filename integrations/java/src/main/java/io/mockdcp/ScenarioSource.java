package io.mockdcp;

import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

/**
 * Where a scenario named in {@link MockDcpOptions#scenario()} is: a file (a path, absolute or
 * relative to the working directory), else a classpath resource (the name as given, or with
 * {@code .yaml} added), else the name of a scenario bundled with mockdcp, which only the server
 * can find ({@code mockdcp scenarios} lists them).
 *
 * @param file the file, or null
 * @param resource the classpath resource, or null
 * @param bundled the bundled scenario's name, or null
 */
record ScenarioSource(Path file, URL resource, String bundled) {

  static ScenarioSource of(String scenario) {
    Path path = Path.of(scenario);
    if (Files.isRegularFile(path)) {
      return new ScenarioSource(path.toAbsolutePath(), null, null);
    }
    return resource(scenario)
        .map(url -> new ScenarioSource(null, url, null))
        .orElseGet(() -> new ScenarioSource(null, null, scenario.replaceFirst("\\.ya?ml$", "")));
  }

  private static Optional<URL> resource(String scenario) {
    ClassLoader loader = Thread.currentThread().getContextClassLoader();
    if (loader == null) {
      loader = ScenarioSource.class.getClassLoader();
    }
    String name = scenario.startsWith("/") ? scenario.substring(1) : scenario;
    for (String candidate : new String[] {name, name + ".yaml"}) {
      URL url = loader.getResource(candidate);
      if (url != null) {
        return Optional.of(url);
      }
    }
    return Optional.empty();
  }
}
