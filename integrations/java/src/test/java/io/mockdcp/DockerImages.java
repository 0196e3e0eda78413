package io.mockdcp;

import com.github.dockerjava.api.DockerClient;
import com.github.dockerjava.api.exception.NotFoundException;
import java.util.Optional;
import org.testcontainers.DockerClientFactory;

/** Whether the container tests can run: a Docker engine that has the image. */
final class DockerImages {

  private DockerImages() {}

  /** Why containers of {@code image} cannot run here, or empty when they can. */
  static Optional<String> unavailable(String image) {
    try {
      if (!DockerClientFactory.instance().isDockerAvailable()) {
        return Optional.of("no Docker engine answers (Testcontainers found none)");
      }
      DockerClient client = DockerClientFactory.instance().client();
      try {
        client.inspectImageCmd(image).exec();
      } catch (NotFoundException e) {
        // only the image's 404 means no image (the client's own set-up may 404 on other
        // things, such as a missing default bridge network)
        return Optional.of("the Docker engine has no image " + image + " (docker build -f "
            + "docker/Dockerfile -t mockdcp . in the repository, or -D"
            + MockDcpContainer.IMAGE_PROPERTY + "=IMAGE)");
      }
      return Optional.empty();
    } catch (RuntimeException e) {
      return Optional.of("Docker is not usable: " + e);
    }
  }
}
