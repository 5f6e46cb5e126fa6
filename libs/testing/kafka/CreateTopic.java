// Creates a topic with its replicas placed by hand, through Kafka's own Java admin client (the
// kafka-clients jar of the test broker's classpath): the Node.js clients' admin APIs cannot place
// replicas. Run as a single source file: java -cp '<libs>/*' CreateTopic.java <bootstrap> <topic> <replicas>
// where <replicas> is kafka-topics' --replica-assignment form, "1:2:3,2:1:3" (partition 0 on nodes 1,
// 2 and 3 led by 1, partition 1 led by 2, ...). Exits once every partition has its leader.
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

public class CreateTopic {
  public static void main(String[] args) throws Exception {
    Map<Integer, List<Integer>> assignment = new HashMap<>();
    String[] partitions = args[2].split(",");
    for (int partition = 0; partition < partitions.length; partition++) {
      List<Integer> replicas = new ArrayList<>();
      for (String node : partitions[partition].split(":")) replicas.add(Integer.parseInt(node));
      assignment.put(partition, replicas);
    }
    Properties properties = new Properties();
    properties.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    try (Admin admin = Admin.create(properties)) {
      admin.createTopics(List.of(new NewTopic(args[1], assignment))).all().get();
      long deadline = System.currentTimeMillis() + 30_000;
      for (;;) {
        try {
          TopicDescription topic = admin.describeTopics(List.of(args[1])).allTopicNames().get().get(args[1]);
          if (topic.partitions().stream().allMatch(p -> p.leader() != null && !p.leader().isEmpty())) return;
        } catch (ExecutionException error) {
          // A KRaft broker learns of the topic from the controller's log a moment after the creation is
          // acknowledged; asked before that, it does not know it yet.
          if (!(error.getCause() instanceof UnknownTopicOrPartitionException)) throw error;
        }
        if (System.currentTimeMillis() > deadline) throw new IllegalStateException("no leaders after 30 s");
        Thread.sleep(200);
      }
    }
  }
}
