package io.mockdcp.junit;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mockdcp.MockDcpException;
import java.net.URL;
import java.net.URLClassLoader;
import org.junit.jupiter.api.Test;

/** Testcontainers is optional: the container mode without it says what to add. */
class ContainerModeTest {

  @Test
  void withoutTestcontainersTheContainerModeSaysWhatToAdd() throws Exception {
    // a class loader that sees the JDK only, as a project that left Testcontainers out
    try (URLClassLoader bare = new URLClassLoader(new URL[0], ClassLoader.getPlatformClassLoader())) {
      MockDcpException e = assertThrows(MockDcpException.class,
          () -> MockDcpExtension.requireTestcontainers(bare));
      assertTrue(e.getMessage().contains("org.testcontainers:testcontainers:"
          + MockDcpExtension.TESTCONTAINERS_VERSION), e.getMessage());
      assertTrue(e.getMessage().contains("mode LOCAL"), e.getMessage());
    }
  }

  @Test
  void withTestcontainersTheContainerModeGoesOn() {
    assertDoesNotThrow(
        () -> MockDcpExtension.requireTestcontainers(ContainerModeTest.class.getClassLoader()));
  }
}
