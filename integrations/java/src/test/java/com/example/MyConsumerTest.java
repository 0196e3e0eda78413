package com.example;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.couchbase.client.dcp.Client;
import com.couchbase.client.dcp.StreamFrom;
import com.couchbase.client.dcp.StreamTo;
import com.couchbase.client.dcp.highlevel.DatabaseChangeListener;
import com.couchbase.client.dcp.highlevel.Deletion;
import com.couchbase.client.dcp.highlevel.Mutation;
import com.couchbase.client.dcp.highlevel.Rollback;
import com.couchbase.client.dcp.highlevel.StreamFailure;
import io.mockdcp.Expectations;
import io.mockdcp.MockDcpServer;
import io.mockdcp.OracleRow;
import io.mockdcp.Steps;
import io.mockdcp.junit.MockDcp;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

// The example of docs/java.md (cut short in the README), compiled and run here with the
// public API only: keep them in step.
@MockDcp(vbuckets = 64, docs = 1000)
class MyConsumerTest {

  /** The consumer under test: java-dcp-client keeping the latest value of every key. */
  static Client consumer(MockDcpServer server, Map<String, String> received) {
    Client client = Client.builder()
        .seedNodes(server.seedNode())
        .credentials(server.username(), server.password())
        .bucket(server.bucket())
        .build();
    client.nonBlockingListener(new DatabaseChangeListener() {
      @Override
      public void onMutation(Mutation mutation) {
        received.put(mutation.getKey(), new String(mutation.getContent(), UTF_8));
      }

      @Override
      public void onDeletion(Deletion deletion) {
        received.remove(deletion.getKey());
      }

      @Override
      public void onRollback(Rollback rollback) {
        rollback.resume(); // restart the stream from where the server says
      }

      @Override
      public void onFailure(StreamFailure failure) {}
    });
    client.connect().block();
    client.initializeState(StreamFrom.BEGINNING, StreamTo.INFINITY).block();
    client.startStreaming().block();
    return client;
  }

  @Test
  void receivesEveryDocument(MockDcpServer server) throws InterruptedException {
    Map<String, String> received = new ConcurrentHashMap<>();
    Client client = consumer(server, received);
    try {
      server.control().steps(
          Steps.set("user::ada", Map.of("name", "Ada")),
          Steps.delete("user::000007"));
      Map<String, String> expected = server.control().oracle().stream()
          .collect(Collectors.toMap(OracleRow::key, OracleRow::value));
      long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
      while (!received.equals(expected) && System.nanoTime() < deadline) {
        Thread.sleep(50);
      }
      assertEquals(expected, received);
    } finally {
      client.disconnect().block();
    }
  }

  @Test
  @MockDcp(scenario = "rollback-after-failover") // a server of its own, running the scenario
  void rollsBackAfterAFailover(MockDcpServer server) {
    Client client = consumer(server, new ConcurrentHashMap<>());
    try {
      Expectations outcome = server.control().awaitScenario(Duration.ofSeconds(60));
      assertTrue(outcome.passed(), outcome.toString());
    } finally {
      client.disconnect().block();
    }
  }
}
