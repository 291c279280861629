module @softmax_regression_step attributes {mhlo.num_replicas = 1 : i32, mhlo.num_partitions = 1 : i32} {
  func.func public @main(%w: tensor<784x10xf32>, %b: tensor<10xf32>, %x: tensor<16x784xf32>, %y: tensor<16x10xf32>) -> (tensor<784x10xf32>, tensor<10xf32>, tensor<f32>) {
    %xw = "stablehlo.dot_general"(%x, %w) {dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>} : (tensor<16x784xf32>, tensor<784x10xf32>) -> tensor<16x10xf32>
    %bias = "stablehlo.broadcast_in_dim"(%b) {broadcast_dimensions = array<i64: 1>} : (tensor<10xf32>) -> tensor<16x10xf32>
    %logits = "stablehlo.add"(%xw, %bias) : (tensor<16x10xf32>, tensor<16x10xf32>) -> tensor<16x10xf32>
    %lowest = "stablehlo.constant"() {value = dense<-3.0e+38> : tensor<f32>} : () -> tensor<f32>
    %max = "stablehlo.reduce"(%logits, %lowest) ({
    ^bb0(%lhs0: tensor<f32>, %rhs0: tensor<f32>):
      %larger = "stablehlo.maximum"(%lhs0, %rhs0) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%larger) : (tensor<f32>) -> ()
    }) {dimensions = array<i64: 1>} : (tensor<16x10xf32>, tensor<f32>) -> tensor<16xf32>
    %maxes = "stablehlo.broadcast_in_dim"(%max) {broadcast_dimensions = array<i64: 0>} : (tensor<16xf32>) -> tensor<16x10xf32>
    %shifted = "stablehlo.subtract"(%logits, %maxes) : (tensor<16x10xf32>, tensor<16x10xf32>) -> tensor<16x10xf32>
    %exp = "stablehlo.exponential"(%shifted) : (tensor<16x10xf32>) -> tensor<16x10xf32>
    %zero = "stablehlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %sum = "stablehlo.reduce"(%exp, %zero) ({
    ^bb0(%lhs1: tensor<f32>, %rhs1: tensor<f32>):
      %added1 = "stablehlo.add"(%lhs1, %rhs1) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%added1) : (tensor<f32>) -> ()
    }) {dimensions = array<i64: 1>} : (tensor<16x10xf32>, tensor<f32>) -> tensor<16xf32>
    %sums = "stablehlo.broadcast_in_dim"(%sum) {broadcast_dimensions = array<i64: 0>} : (tensor<16xf32>) -> tensor<16x10xf32>
    %probabilities = "stablehlo.divide"(%exp, %sums) : (tensor<16x10xf32>, tensor<16x10xf32>) -> tensor<16x10xf32>
    %log_sums = "stablehlo.log"(%sums) : (tensor<16x10xf32>) -> tensor<16x10xf32>
    %log_probabilities = "stablehlo.subtract"(%shifted, %log_sums) : (tensor<16x10xf32>, tensor<16x10xf32>) -> tensor<16x10xf32>
    %picked = "stablehlo.multiply"(%y, %log_probabilities) : (tensor<16x10xf32>, tensor<16x10xf32>) -> tensor<16x10xf32>
    %log_likelihood = "stablehlo.reduce"(%picked, %zero) ({
    ^bb0(%lhs2: tensor<f32>, %rhs2: tensor<f32>):
      %added2 = "stablehlo.add"(%lhs2, %rhs2) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%added2) : (tensor<f32>) -> ()
    }) {dimensions = array<i64: 0, 1>} : (tensor<16x10xf32>, tensor<f32>) -> tensor<f32>
    %batch = "stablehlo.constant"() {value = dense<16.0> : tensor<f32>} : () -> tensor<f32>
    %global_batch = "stablehlo.all_reduce"(%batch) ({
    ^bb0(%lhs3: tensor<f32>, %rhs3: tensor<f32>):
      %added3 = "stablehlo.add"(%lhs3, %rhs3) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%added3) : (tensor<f32>) -> ()
    }) {replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (tensor<f32>) -> tensor<f32>
    %total_log_likelihood = "stablehlo.all_reduce"(%log_likelihood) ({
    ^bb0(%lhs4: tensor<f32>, %rhs4: tensor<f32>):
      %added4 = "stablehlo.add"(%lhs4, %rhs4) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%added4) : (tensor<f32>) -> ()
    }) {replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (tensor<f32>) -> tensor<f32>
    %mean_log_likelihood = "stablehlo.divide"(%total_log_likelihood, %global_batch) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %loss = "stablehlo.negate"(%mean_log_likelihood) : (tensor<f32>) -> tensor<f32>
    %errors = "stablehlo.subtract"(%probabilities, %y) : (tensor<16x10xf32>, tensor<16x10xf32>) -> tensor<16x10xf32>
    %local_grad_w = "stablehlo.dot_general"(%x, %errors) {dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]>} : (tensor<16x784xf32>, tensor<16x10xf32>) -> tensor<784x10xf32>
    %local_grad_b = "stablehlo.reduce"(%errors, %zero) ({
    ^bb0(%lhs5: tensor<f32>, %rhs5: tensor<f32>):
      %added5 = "stablehlo.add"(%lhs5, %rhs5) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%added5) : (tensor<f32>) -> ()
    }) {dimensions = array<i64: 0>} : (tensor<16x10xf32>, tensor<f32>) -> tensor<10xf32>
    %sum_grad_w = "stablehlo.all_reduce"(%local_grad_w) ({
    ^bb0(%lhs6: tensor<f32>, %rhs6: tensor<f32>):
      %added6 = "stablehlo.add"(%lhs6, %rhs6) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%added6) : (tensor<f32>) -> ()
    }) {replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (tensor<784x10xf32>) -> tensor<784x10xf32>
    %sum_grad_b = "stablehlo.all_reduce"(%local_grad_b) ({
    ^bb0(%lhs7: tensor<f32>, %rhs7: tensor<f32>):
      %added7 = "stablehlo.add"(%lhs7, %rhs7) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%added7) : (tensor<f32>) -> ()
    }) {replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (tensor<10xf32>) -> tensor<10xf32>
    %learning_rate = "stablehlo.constant"() {value = dense<0.1> : tensor<f32>} : () -> tensor<f32>
    %step_size = "stablehlo.divide"(%learning_rate, %global_batch) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %step_sizes_w = "stablehlo.broadcast_in_dim"(%step_size) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<784x10xf32>
    %step_sizes_b = "stablehlo.broadcast_in_dim"(%step_size) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<10xf32>
    %update_w = "stablehlo.multiply"(%step_sizes_w, %sum_grad_w) : (tensor<784x10xf32>, tensor<784x10xf32>) -> tensor<784x10xf32>
    %update_b = "stablehlo.multiply"(%step_sizes_b, %sum_grad_b) : (tensor<10xf32>, tensor<10xf32>) -> tensor<10xf32>
    %new_w = "stablehlo.subtract"(%w, %update_w) : (tensor<784x10xf32>, tensor<784x10xf32>) -> tensor<784x10xf32>
    %new_b = "stablehlo.subtract"(%b, %update_b) : (tensor<10xf32>, tensor<10xf32>) -> tensor<10xf32>
    "func.return"(%new_w, %new_b, %loss) : (tensor<784x10xf32>, tensor<10xf32>, tensor<f32>) -> ()
  }
}
