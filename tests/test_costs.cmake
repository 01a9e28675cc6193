# Read by ctest after the discovered tests (TEST_INCLUDE_FILES, appended last
# in tests/CMakeLists.txt). COST: seconds measured on the 2 shared cores, so
# that `ctest -j2` starts the longest first even in a fresh clone (no
# Testing/Temporary/CTestCostData.txt yet) instead of leaving one for the
# tail. PROCESSORS 2: the test runs 2 or 4 MPI ranks most of its time, so it
# runs alone (a second test beside it oversubscribes the cores, and ranks
# polling for a message take the cores from those computing; the calibration
# measures compute on both cores at once). A name no longer defined is ignored.
foreach(t
    MemoryReport.MeasuredMatchesPredictedAndTheLeversMoveIt
    Fsdp.Zero3BytesPerParameterAtDp4
    ContextParallel.MemoryIsPredictedAndActivationsDivideByCp
    PlanCli.CalibrateWritesAProfilePlanRunsWith
    PipelineParallel.LayoutsMatchOneRank
    DistributedOptimizer.MatchesThePlainOptimizerAtEachLayout
    ServeTp2.AnswersAsOneRank
    ServeEp2.MoeAnswersAsOneRank
    MtpCli.LayoutsMatchOneRank
    MtpCli.CheckpointSavedAtTp2Pp2ResumesAtTp1
    DeepseekConvert.ImportedAtTp2Ep2FineTunesOnFourRanksAndExportsWhatTheJudgeScores
    DeepseekConvert.TrainedAtTp2Ep2ExportsAFolderTheJudgeScoresAsGenerateReports)
  set_tests_properties(${t} PROPERTIES PROCESSORS 2)
endforeach()
set_tests_properties(MemoryReport.MeasuredMatchesPredictedAndTheLeversMoveIt PROPERTIES COST 120)
set_tests_properties(Fsdp.Zero3BytesPerParameterAtDp4 PROPERTIES COST 40)
set_tests_properties(ContextParallel.MemoryIsPredictedAndActivationsDivideByCp PROPERTIES COST 30)
set_tests_properties(PlanCli.CalibrateWritesAProfilePlanRunsWith PROPERTIES COST 30)
set_tests_properties(
    QwenMoeConvert.ImportedAtTp2Tp2Pp2AndEp2DecodesToTheJudgesLogProbsAndExportsBack
    OutputPaths.TrainOutputsNeverReplaceOrAppendToItsInputs
    MixtralConvert.ImportedAtTp1Tp2Pp2AndTp2Ep2DecodesAndScoresToTheJudgesLogProbs
    DeepseekConvert.V3ImportedAtTp1AndTp2Ep2DecodesToTheJudgesLogProbsAndExportsBack
    Recompute.FullUniformAndBlockMatchKeepingEverything
    MegatronConfigs.TodaysOpenModelsTrainWithOnlyTheirSizesShrunk
    PROPERTIES COST 25)
set_tests_properties(
    QwenConvert.TheJudgeSeesTheBiasesAndTheNorms
    PipelineParallel.LayoutsMatchOneRank
    QwenConvert.Qwen3WithQkNormsAndHeadDimImportsAtTp2AndTp2Pp2AndExportsBack
    QwenConvert.Qwen2WithQkvBiasTiedImportsAtTp2AndTp2Pp2AndExportsBack
    DistributedOptimizer.MatchesThePlainOptimizerAtEachLayout
    BadArgs.NegativeOrZeroValuesNameTheirFlag
    PROPERTIES COST 15)
