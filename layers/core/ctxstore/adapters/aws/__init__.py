"""AWS backend: DynamoDB, S3, OpenSearch Serverless, Step Functions, SQS, Neptune."""
