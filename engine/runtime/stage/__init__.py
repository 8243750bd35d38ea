"""One epoch on Spark: the pipeline over the job graph, the stateless operators, the VSN
stage that routes rows by key group to instances, and the regions Spark fuses."""
