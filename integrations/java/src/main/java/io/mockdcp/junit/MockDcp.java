package io.mockdcp.junit;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Inherited;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Runs a mockdcp server for a test class or method and injects it: a parameter of type {@link
 * io.mockdcp.MockDcpServer} (or {@link io.mockdcp.MockDcpControl}) of a test, lifecycle method
 * or constructor gets it.
 *
 * <pre>{@code
 * @MockDcp(vbuckets = 64, docs = 100)
 * class MyConsumerTest {
 *   @Test
 *   void streamsEverything(MockDcpServer server) { ... }
 *
 *   @Test
 *   @MockDcp(scenario = "rollback-after-failover")
 *   void rollsBack(MockDcpServer server) { ... }
 * }
 * }</pre>
 *
 * <p>On a class, one server serves all its tests (and its {@code @Nested} classes), started
 * when a parameter first asks for it and stopped after the class; on a method, that test gets
 * its own, stopped after it.
 */
@Target({ElementType.TYPE, ElementType.METHOD})
@Retention(RetentionPolicy.RUNTIME)
@Documented
@Inherited
@ExtendWith(MockDcpExtension.class)
public @interface MockDcp {

  /**
   * A scenario to serve: a YAML file (a path, or a classpath resource such as {@code
   * scenarios/my.yaml}) or the name of one bundled with mockdcp ({@code
   * rollback-after-failover}). Empty for none.
   */
  String scenario() default "";

  /** The bucket's vbuckets (1..1024); 0 for the server's default (1024) or the scenario's. */
  int vbuckets() default 0;

  /** Seeded documents loaded before the server is ready (none with a scenario). */
  int docs() default 0;

  /** Also serve KV over TLS and HTTPS. */
  boolean tls() default false;

  /**
   * Data nodes of the cluster, each with its own ports ({@code mockdcp serve --nodes N}); the
   * injected server's ports are node 0's, {@link io.mockdcp.MockDcpServer#nodes()} lists them
   * all. More than one needs {@link Mode#LOCAL} (a container publishes one node's ports and is
   * refused before it starts).
   */
  int nodes() default 1;

  /**
   * Replica copies of each vbucket, each on another node ({@code --replicas N}): 0..3 and
   * fewer than {@link #nodes()}.
   */
  int replicas() default 0;

  /** More {@code mockdcp serve} arguments, e.g. {@code {"--collections", "inventory.hotel"}}. */
  String[] args() default {};

  /** Where the server runs. */
  Mode mode() default Mode.AUTO;

  /** The image of {@link Mode#CONTAINER}; empty for {@link io.mockdcp.MockDcpContainer#defaultImage()}. */
  String image() default "";

  /** Where the server runs. */
  enum Mode {
    /**
     * {@link #LOCAL} when the {@code mockdcp} command is on {@code PATH}, else {@link
     * #CONTAINER}; the system property {@value MockDcpExtension#MODE_PROPERTY} ({@code local} or
     * {@code container}) decides instead when set.
     */
    AUTO,
    /** A {@code mockdcp serve} process ({@link io.mockdcp.LocalMockDcp}). */
    LOCAL,
    /** The Docker image through Testcontainers ({@link io.mockdcp.MockDcpContainer}). */
    CONTAINER
  }
}
