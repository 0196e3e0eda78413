package io.mockdcp.junit;

import io.mockdcp.LocalMockDcp;
import io.mockdcp.MockDcpContainer;
import io.mockdcp.MockDcpControl;
import io.mockdcp.MockDcpException;
import io.mockdcp.MockDcpOptions;
import io.mockdcp.MockDcpServer;
import java.lang.reflect.AnnotatedElement;
import java.util.Locale;
import java.util.Optional;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolutionException;
import org.junit.jupiter.api.extension.ParameterResolver;
import org.junit.platform.commons.support.AnnotationSupport;

/**
 * The extension behind {@link MockDcp}: resolves {@link MockDcpServer} and {@link
 * MockDcpControl} parameters with the server of the nearest {@code @MockDcp} (the test method's,
 * else its class's or an enclosing class's), started on first use and stopped when that
 * method or class is done.
 */
public final class MockDcpExtension implements ParameterResolver {

  /**
   * The Testcontainers release this artifact is built with: an optional dependency, which a
   * project that uses the container mode adds itself.
   */
  public static final String TESTCONTAINERS_VERSION = "2.0.5";

  /** Overrides {@link MockDcp.Mode#AUTO}: {@code local} or {@code container}. */
  public static final String MODE_PROPERTY = "mockdcp.mode";

  private static final ExtensionContext.Namespace NAMESPACE =
      ExtensionContext.Namespace.create(MockDcpExtension.class);

  @Override
  public boolean supportsParameter(ParameterContext parameter, ExtensionContext context) {
    Class<?> type = parameter.getParameter().getType();
    return type == MockDcpServer.class || type == MockDcpControl.class;
  }

  @Override
  public Object resolveParameter(ParameterContext parameter, ExtensionContext context) {
    MockDcpServer server = server(context);
    return parameter.getParameter().getType() == MockDcpControl.class ? server.control() : server;
  }

  /** The server of the nearest {@code @MockDcp} around {@code context}, started if need be. */
  static MockDcpServer server(ExtensionContext context) {
    for (ExtensionContext c = context; c != null; c = c.getParent().orElse(null)) {
      Optional<AnnotatedElement> element = c.getElement();
      Optional<MockDcp> annotation = element.flatMap(MockDcpExtension::annotation);
      if (annotation.isPresent()) {
        MockDcp config = annotation.get();
        // keyed by the annotated method or class: a store also answers with its parents'
        // values, and a method's server must not be its class's
        return c.getStore(NAMESPACE)
            .getOrComputeIfAbsent(element.get(), key -> new Running(start(config)), Running.class)
            .server();
      }
    }
    throw new ParameterResolutionException(
        "a MockDcpServer parameter needs @MockDcp on the test method or class");
  }

  private static Optional<MockDcp> annotation(AnnotatedElement element) {
    return AnnotationSupport.findAnnotation(element, MockDcp.class);
  }

  /** Starts the server an annotation describes. */
  static MockDcpServer start(MockDcp config) {
    MockDcpOptions options = options(config);
    if (mode(config.mode()) == MockDcp.Mode.LOCAL) {
      return LocalMockDcp.start(options);
    }
    requireTestcontainers(MockDcpExtension.class.getClassLoader());
    MockDcpContainer container = config.image().isEmpty()
        ? new MockDcpContainer()
        : new MockDcpContainer(config.image());
    container.withOptions(options);
    try {
      container.start();
    } catch (RuntimeException e) {
      container.stop();
      throw e;
    }
    return container;
  }

  /**
   * The container mode needs Testcontainers, an optional dependency of mockdcp-junit (the local
   * mode loads none of it): without it on the class path, a clear error says what to add.
   */
  static void requireTestcontainers(ClassLoader loader) {
    try {
      Class.forName("org.testcontainers.containers.GenericContainer", false, loader);
    } catch (ClassNotFoundException | LinkageError e) {
      throw new MockDcpException("the container mode needs Testcontainers, an optional dependency"
          + " of mockdcp-junit: add org.testcontainers:testcontainers:" + TESTCONTAINERS_VERSION
          + " to the test dependencies, or run mockdcp as a local process (pip install mockdcp,"
          + " then mode LOCAL or AUTO with the mockdcp command on PATH)", e);
    }
  }

  static MockDcpOptions options(MockDcp config) {
    return MockDcpOptions.defaults()
        .withScenario(config.scenario().isEmpty() ? null : config.scenario())
        .withVbuckets(config.vbuckets() == 0 ? null : config.vbuckets())
        .withDocs(config.docs())
        .withTls(config.tls())
        .withNodes(config.nodes())
        .withReplicas(config.replicas())
        .withArgs(config.args());
  }

  /** {@link MockDcp.Mode#AUTO} resolved. */
  static MockDcp.Mode mode(MockDcp.Mode mode) {
    if (mode != MockDcp.Mode.AUTO) {
      return mode;
    }
    String chosen = System.getProperty(MODE_PROPERTY, "");
    if (!chosen.isBlank()) {
      return MockDcp.Mode.valueOf(chosen.trim().toUpperCase(Locale.ROOT));
    }
    return LocalMockDcp.isAvailable() ? MockDcp.Mode.LOCAL : MockDcp.Mode.CONTAINER;
  }

  /**
   * A started server in a JUnit store, stopped when the store's context closes. It is both
   * kinds of closeable resource JUnit knows (AutoCloseable from 5.13, CloseableResource
   * before); its close is idempotent either way.
   */
  @SuppressWarnings("deprecation")
  private record Running(MockDcpServer server)
      implements ExtensionContext.Store.CloseableResource, AutoCloseable {
    @Override
    public void close() {
      server.close();
    }
  }
}
